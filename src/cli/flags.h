/* Table-driven flag parsing for the subcommands: each flag names its type, destination and valid
 * range; errors name the flag, the value and what was expected (the range, or the valid values of
 * a choice). Numbers are parsed strictly: the whole value must be a number of the flag's kind, and
 * it must fit the flag's range and its C type (never a float-to-integer conversion out of range).
 * Parsing happens once, here in the CLI; the library receives typed values.
 *
 * vkg_flags_parse_args neither prints nor exits (it can be driven by a fuzzer); vkg_flags_parse
 * wraps it for the subcommands and prints the usage or the error. */
#ifndef VKG_CLI_FLAGS_H
#define VKG_CLI_FLAGS_H

#include <stdint.h>
#include <stdio.h>

typedef enum vkg_flag_type {
    VKG_FLAG_INT,    /* int: a whole number, optionally with a K/M/G suffix (1K = 1024) */
    VKG_FLAG_LL,     /* long long, as INT */
    VKG_FLAG_U64,    /* uint64_t, as INT */
    VKG_FLAG_FLOAT,  /* float: a finite decimal number */
    VKG_FLAG_DOUBLE, /* double, as FLOAT */
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
    double min, max; /* inclusive numeric range when min < max; otherwise the C type's range */
} vkg_flag;

#define VKG_FLAGS_MAX 96 /* flags in one table */

/* What vkg_flags_parse_args returns. */
typedef enum vkg_flags_status {
    VKG_FLAGS_OK = 0,
    VKG_FLAGS_HELP = 1,  /* --help or -h was given (nothing after it was parsed) */
    VKG_FLAGS_USAGE = 2, /* a usage error, described in vkg_flags_result.error */
} vkg_flags_status;

typedef struct vkg_flags_result {
    unsigned char seen[VKG_FLAGS_MAX]; /* seen[i]: flags[i] was given */
    int npos;                          /* positional arguments stored */
    char error[512];                   /* the usage error ("" when none) */
} vkg_flags_result;

/* Parse argv[1..argc) against flags (at most VKG_FLAGS_MAX). "--name value" and "--name=value"
 * are accepted; each value is stored into its flag's dst (the last one wins when a flag is
 * repeated) and marked in r->seen. Arguments that do not start with '-' are positional: stored in
 * pos (room for argc entries; their count in r->npos) when pos is not NULL, a usage error
 * otherwise. Returns a vkg_flags_status; never prints, never exits. On VKG_FLAGS_USAGE, dst
 * fields of flags before the bad one may have been written. */
int vkg_flags_parse_args(const vkg_flag *flags, int nflags, int argc, char **argv, char **pos,
                         vkg_flags_result *r);

/* 1 when the flag called name (which must be in flags) was given. */
int vkg_flags_seen(const vkg_flag *flags, int nflags, const vkg_flags_result *r, const char *name);

/* Parse s, whole numbers from lo to hi (0 <= lo <= hi) written in decimal digits and separated
 * by single commas ("4,2,2"), into out (room for cap). Returns the count, or -1 when s is not
 * such a list: empty, a sign, a blank, a stray or trailing comma, a value out of range, more
 * than cap values. */
int vkg_flags_int_list(const char *s, int lo, int hi, int *out, int cap);

/* The default --help shows for fl, written into buf (cap bytes): the value fl->dst holds now, as
 * argparse shows "(default: ...)"; "" for a BOOL flag, a NULL string, a choice index out of range
 * and a help text that states its default itself (it contains "default": the way to show a
 * default that is resolved later, such as "default: B x T"). Returns buf. */
const char *vkg_flags_default(const vkg_flag *fl, char *buf, size_t cap);

/* The usage text: "usage: vkgpt CMD SYNOPSIS" and one line per flag, each ending in
 * "(default: VALUE)" where vkg_flags_default gives one (the values dst holds now). */
void vkg_flags_usage(FILE *f, const char *cmd, const char *synopsis, const vkg_flag *flags,
                     int nflags);

/* vkg_flags_parse_args for subcommand cmd, printing: returns 0 on success, 1 when --help was given
 * (the usage printed to stdout, with the defaults dst held before any flag was parsed), 2 on a
 * usage error ("vkgpt CMD: ERROR" printed to stderr).
 * pos as above; r may be NULL when the caller needs neither seen nor npos. */
int vkg_flags_parse(const char *cmd, const char *synopsis, const vkg_flag *flags, int nflags,
                    int argc, char **argv, char **pos, vkg_flags_result *r);

#endif
