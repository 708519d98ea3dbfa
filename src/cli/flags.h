/* Table-driven flag parsing for the subcommands: each flag names its type and destination;
 * errors name the flag and, for choices, list the valid values. Parsing happens once, here in the
 * CLI; the library receives typed values. */
#ifndef VKG_CLI_FLAGS_H
#define VKG_CLI_FLAGS_H

#include <stdint.h>

typedef enum vkg_flag_type {
    VKG_FLAG_INT,    /* int */
    VKG_FLAG_LL,     /* long long (accepts K/M/G suffixes: 1K = 1024) */
    VKG_FLAG_U64,    /* uint64_t */
    VKG_FLAG_FLOAT,  /* float */
    VKG_FLAG_STR,    /* const char * (points into argv) */
    VKG_FLAG_CHOICE, /* int: index of the value in `choices` (NULL-terminated) */
    VKG_FLAG_BOOL,   /* int set to 1; takes no value */
} vkg_flag_type;

typedef struct vkg_flag {
    const char *name; /* "--lr" */
    vkg_flag_type type;
    void *dst;
    const char *help;
    const char *const *choices;
    double min, max; /* numeric range checked when min < max */
} vkg_flag;

/* Parse argv[1..argc) against flags. Returns 0 on success, 1 when --help was given (usage
 * printed to stdout), 2 on a usage error (message and usage printed to stderr). */
int vkg_flags_parse(const char *cmd, const char *synopsis, const vkg_flag *flags, int nflags,
                    int argc, char **argv);

#endif
