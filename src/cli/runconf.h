/* A run's settings kept beside its checkpoints (CKPT_DIR/run.json), so that `--resume` continues
 * the run as it was started rather than with the defaults of every flag not repeated. The file
 * holds the value of each flag of a subcommand's table as text, as it would be typed:
 *
 *   {"format": "vkgpt-run", "version": 1, "flags": {"lr": "0.0017", "schedule": "cosine", ...}}
 *
 * Loading applies the values through the flag table itself, so a saved value is checked exactly
 * as the same flag on the command line. Here: the file's text and its reading; which flags are
 * kept and what a difference means is the subcommand's business. Writing the file (atomically,
 * with the first checkpoint) is the trainer's. */
#ifndef VKG_CLI_RUNCONF_H
#define VKG_CLI_RUNCONF_H

#include <stddef.h>

#include "cli/flags.h"

#define VKG_RUNCONF_VERSION 1
/* The largest run.json read (a run's settings are a few KiB). */
#define VKG_RUNCONF_MAX_BYTES (1 << 20)

/* The values read from a run.json: value[i] is flags[i]'s saved text, NULL when not saved. */
typedef struct vkg_cli_runconf {
    char *value[VKG_FLAGS_MAX];
} vkg_cli_runconf;

/* The current value of flag f as text (cap bytes), as it would be given on the command line:
 * shortest decimal that reads back to the same number, a choice's name, "true" for a set BOOL.
 * Returns 0 (buf "") when the flag holds no value to keep: a NULL string, an unset BOOL, or a
 * number outside the flag's range (a "not given" marker). */
int vkg_cli_flag_text(const vkg_flag *f, char *buf, size_t cap);

/* The JSON text of run.json for flags (nflags of them): every flag with a value to keep
 * (vkg_cli_flag_text), except those with skip[i] == VKG_RUNCONF_SKIP; a relative path of a flag
 * with skip[i] == VKG_RUNCONF_PATH is saved from the current folder (absolute), so that a run
 * resumes from any folder. Malloc'ed (the caller frees); NULL when out of memory. */
#define VKG_RUNCONF_SKIP 1
#define VKG_RUNCONF_PATH 2
char *vkg_cli_runconf_json(const vkg_flag *flags, int nflags, const unsigned char *skip);

/* Read the run.json at path and apply each saved value to its flag's destination, through the
 * flag's own parsing and range checks; rc->value keeps the texts (the applied strings point into
 * them: keep rc until the flags are no longer used, then vkg_cli_runconf_free). Returns 0 when
 * read and applied, 1 when there is no file at path (nothing changed), 2 when it cannot be read,
 * is not a regular file, holds more than VKG_RUNCONF_MAX_BYTES or is damaged: a syntax error,
 * another format or version, an unknown field or one with skip[i] set, a field twice, or a value
 * its flag refuses; err (cap bytes) then names the file, the field and what was expected. */
int vkg_cli_runconf_load(const char *path, const vkg_flag *flags, int nflags,
                         const unsigned char *skip, vkg_cli_runconf *rc, char *err, size_t cap);

/* vkg_cli_runconf_load on the len bytes of text doc, named path in err: 0 or 2 as there. */
int vkg_cli_runconf_parse(const char *path, const char *doc, size_t len, const vkg_flag *flags,
                          int nflags, const unsigned char *skip, vkg_cli_runconf *rc, char *err,
                          size_t cap);

/* Free the texts of rc and zero it. */
void vkg_cli_runconf_free(vkg_cli_runconf *rc);

#endif
