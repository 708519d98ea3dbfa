/* `vkgpt train --resume`: the run's settings taken from CKPT_DIR/run.json as the defaults of every
 * flag not given again, each flag given again that differs from them reported, those that would
 * change what the saved state means refused, and the model's architecture checked against the
 * checkpoint. Also the run.json text a run hands the trainer to write with its first checkpoint.
 * The flags themselves are cmd_train.c's. */
#ifndef VKG_CLI_TRAIN_RESUME_H
#define VKG_CLI_TRAIN_RESUME_H

#include "cli/runconf.h"
#include "vkgpt/train.h"

typedef struct vkg_cli_resume {
    vkg_cli_runconf saved; /* the values read from run.json (flags' strings point into them) */
    char path[1100];       /* CKPT_DIR/run.json */
    int found;             /* 1: run.json was read and applied */
    char notes[4096];      /* one line per flag given again that differs from run.json */
    char *json;            /* the run.json text this run hands the trainer (malloc'ed), or NULL */
} vkg_cli_resume;

/* The flags run.json keeps: all but those that say where this invocation runs or from where it
 * starts (--device, --tiles, --validation, --quiet, --init, --ckpt-dir, --resume,
 * --resume-fallback, --world-size, --rank, --master-addr, --master-port), and the architecture
 * flags (--layers, --heads, --channels, --ctx, --vocab) only when they made the model: not when
 * it came from --init (from_init), nor, resuming (res from vkg_cli_train_resume_settings, else
 * NULL), when neither run.json nor the command line (r, or NULL) gave them. skip[i] is set for
 * each flag of flags not kept. */
void vkg_cli_train_runconf_skip(const vkg_flag *flags, int nflags, int from_init,
                                const vkg_cli_resume *res, const vkg_flags_result *r,
                                unsigned char *skip);

/* For --resume with --ckpt-dir dir: reset(ctx) puts every flag back to its default, the values of
 * dir/run.json are applied over them, and argv (already parsed once into r) is parsed again over
 * those, so that flags given again win; r is refilled. Records in res which flags given again
 * differ from run.json. Without a run.json (a run from before it was kept), the flags stay as
 * parsed and res->found is 0. Returns 0, or 2 after printing why: a damaged run.json (naming the
 * file and field), or --tokenizer given with another value than the run's (it would change what
 * the saved model's token ids mean). res must be released with vkg_cli_runconf_free(&res->saved)
 * once the flags are no longer used. */
int vkg_cli_train_resume_settings(const char *dir, const vkg_flag *flags, int nflags, int argc,
                                  char **argv, void (*reset)(void *), void *ctx,
                                  vkg_flags_result *r, vkg_cli_resume *res);

/* Print where a resumed run's settings come from and each flag given again that differs (rank 0
 * prints; the others say nothing). */
void vkg_cli_train_resume_report(const vkg_cli_resume *res, int resume, int rank);

/* Which of --layers, --heads, --channels, --ctx, --vocab were given (r from parsing flags). */
void vkg_cli_train_arch_given(const vkg_flag *flags, int nflags, const vkg_flags_result *r,
                              int arch_given[5]);

/* Print where the checkpoints go, how often, and how many --keep keeps (nothing without
 * c->ckpt_dir). every: --ckpt-every. */
void vkg_cli_train_ckpt_line(const vkg_train_config *c, int every);

/* A resumed model has the checkpoint's architecture: an architecture flag given with --resume
 * (arch_given[i] for --layers, --heads, --channels, --ctx, --vocab) must agree with it, not be
 * silently ignored. 0, or 2 after naming the disagreement. */
int vkg_cli_train_check_resumed(vkg_trainer_t *t, const vkg_train_config *c,
                                const int arch_given[5]);

#endif
