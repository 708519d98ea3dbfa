/* Flag parsing for the CLI (see flags.h): strict numbers, ranges checked against the flag's table
 * entry and its C type, messages that name the flag, the value and the valid range. Knows no
 * subcommand; conflicts between flags are the subcommands' business. */
#include "cli/flags.h"

#include "base/parse.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *vkg_flags_default(const vkg_flag *fl, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (fl->help && strstr(fl->help, "default"))
        return buf; /* the help text says it */
    switch (fl->type) {
    case VKG_FLAG_INT:
        snprintf(buf, cap, "%d", *(const int *)fl->dst);
        break;
    case VKG_FLAG_LL:
        snprintf(buf, cap, "%lld", *(const long long *)fl->dst);
        break;
    case VKG_FLAG_U64:
        snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)fl->dst);
        break;
    case VKG_FLAG_FLOAT:
        snprintf(buf, cap, "%g", (double)*(const float *)fl->dst);
        break;
    case VKG_FLAG_DOUBLE:
        snprintf(buf, cap, "%g", *(const double *)fl->dst);
        break;
    case VKG_FLAG_STR:
        if (*(const char *const *)fl->dst)
            snprintf(buf, cap, "%s", *(const char *const *)fl->dst);
        break;
    case VKG_FLAG_CHOICE: {
        int k = *(const int *)fl->dst, n = 0;
        while (fl->choices[n])
            n++;
        if (k >= 0 && k < n)
            snprintf(buf, cap, "%s", fl->choices[k]);
        break;
    }
    case VKG_FLAG_BOOL:
        break;
    }
    return buf;
}

#define DEFAULT_CAP 64 /* bytes of one flag's shown default */

/* The usage with the defaults given in defs (DEFAULT_CAP bytes per flag). */
static void print_usage(FILE *f, const char *cmd, const char *synopsis, const vkg_flag *flags,
                        int nflags, const char (*defs)[DEFAULT_CAP])
{
    fprintf(f, "usage: vkgpt %s %s\n\noptions:\n", cmd, synopsis);
    int width = 16; /* the help texts line up after the longest flag name */
    for (int i = 0; i < nflags; i++)
        width = (int)strlen(flags[i].name) > width ? (int)strlen(flags[i].name) : width;
    for (int i = 0; i < nflags; i++) {
        const vkg_flag *fl = &flags[i];
        fprintf(f, "  %-*s %s", width, fl->name, fl->help);
        if (fl->type == VKG_FLAG_CHOICE) {
            fprintf(f, " (");
            for (int j = 0; fl->choices[j]; j++)
                fprintf(f, "%s%s", j ? "|" : "", fl->choices[j]);
            fprintf(f, ")");
        }
        if (defs[i][0])
            fprintf(f, " (default: %s)", defs[i]);
        fprintf(f, "\n");
    }
}

void vkg_flags_usage(FILE *f, const char *cmd, const char *synopsis, const vkg_flag *flags,
                     int nflags)
{
    char defs[VKG_FLAGS_MAX][DEFAULT_CAP];
    nflags = nflags < VKG_FLAGS_MAX ? nflags : VKG_FLAGS_MAX;
    for (int i = 0; i < nflags; i++)
        vkg_flags_default(&flags[i], defs[i], DEFAULT_CAP);
    print_usage(f, cmd, synopsis, flags, nflags, (const char(*)[DEFAULT_CAP])defs);
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int
usage_error(vkg_flags_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
    return VKG_FLAGS_USAGE;
}

/* A whole number: optional sign, decimal digits, optional K/M/G (x 2^10, 2^20, 2^30), nothing
 * else. Sets *neg and the magnitude *mag; 0 when s is not of that form or the magnitude does not
 * fit 64 bits. */
/* A finite number that strtod reads whole (no leading blanks, no overflow or underflow). */
static int parse_real(const char *s, double *out)
{
    char *end;
    if (!*s || *s == ' ' || *s == '\t' || *s == '\n')
        return 0;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno == ERANGE || !isfinite(v))
        return 0;
    *out = v;
    return 1;
}

/* The signed range of an INT or LL flag: its C type's, narrowed by the table's min/max. */
static void signed_range(const vkg_flag *fl, long long *lo, long long *hi)
{
    *lo = fl->type == VKG_FLAG_INT ? INT_MIN : LLONG_MIN;
    *hi = fl->type == VKG_FLAG_INT ? INT_MAX : LLONG_MAX;
    if (fl->min < fl->max) {
        if (fl->min > (double)*lo)
            *lo = (long long)ceil(fl->min);
        if (fl->max < (double)*hi)
            *hi = (long long)floor(fl->max);
    }
}

static void unsigned_range(const vkg_flag *fl, uint64_t *lo, uint64_t *hi)
{
    *lo = 0;
    *hi = UINT64_MAX;
    if (fl->min < fl->max) {
        if (fl->min > 0)
            *lo = (uint64_t)ceil(fl->min);
        if (fl->max < 18446744073709551616.0) /* 2^64 */
            *hi = (uint64_t)floor(fl->max);
    }
}

static int set_whole(const vkg_flag *fl, const char *val, vkg_flags_result *r)
{
    int neg = 0, ok = 0;
    uint64_t mag = 0;
    int parsed = vkg_parse_whole(val, &neg, &mag);
    if (fl->type == VKG_FLAG_U64) {
        uint64_t lo, hi;
        unsigned_range(fl, &lo, &hi);
        ok = parsed && (!neg || mag == 0) && (neg ? 0 : mag) >= lo && mag <= hi;
        if (!ok)
            return usage_error(r, "%s must be a whole number from %llu to %llu, got '%s'", fl->name,
                               (unsigned long long)lo, (unsigned long long)hi, val);
        *(uint64_t *)fl->dst = neg ? 0 : mag;
        return VKG_FLAGS_OK;
    }
    long long lo, hi, v = 0;
    signed_range(fl, &lo, &hi);
    if (parsed && !neg && mag <= (uint64_t)LLONG_MAX)
        v = (long long)mag, ok = 1;
    else if (parsed && neg && mag <= (uint64_t)LLONG_MAX + 1)
        v = mag == (uint64_t)LLONG_MAX + 1 ? LLONG_MIN : -(long long)mag, ok = 1;
    if (!ok || v < lo || v > hi)
        return usage_error(r, "%s must be a whole number from %lld to %lld, got '%s'", fl->name, lo,
                           hi, val);
    if (fl->type == VKG_FLAG_INT)
        *(int *)fl->dst = (int)v;
    else
        *(long long *)fl->dst = v;
    return VKG_FLAGS_OK;
}

static int set_real(const vkg_flag *fl, const char *val, vkg_flags_result *r)
{
    double v = 0.0;
    double lo = fl->type == VKG_FLAG_FLOAT ? -FLT_MAX : -DBL_MAX;
    double hi = fl->type == VKG_FLAG_FLOAT ? FLT_MAX : DBL_MAX;
    if (fl->min < fl->max)
        lo = fl->min, hi = fl->max;
    if (!parse_real(val, &v) || v < lo || v > hi)
        return usage_error(r, "%s must be a number from %g to %g, got '%s'", fl->name, lo, hi, val);
    if (fl->type == VKG_FLAG_FLOAT)
        *(float *)fl->dst = (float)v;
    else
        *(double *)fl->dst = v;
    return VKG_FLAGS_OK;
}

static int set_value(const vkg_flag *fl, const char *val, vkg_flags_result *r)
{
    switch (fl->type) {
    case VKG_FLAG_STR:
        *(const char **)fl->dst = val;
        return VKG_FLAGS_OK;
    case VKG_FLAG_CHOICE: {
        size_t len = 0;
        for (int j = 0; fl->choices[j]; j++) {
            if (!strcmp(val, fl->choices[j])) {
                *(int *)fl->dst = j;
                return VKG_FLAGS_OK;
            }
        }
        len = (size_t)snprintf(r->error, sizeof r->error, "%s: '%s' is not one of ", fl->name, val);
        for (int j = 0; fl->choices[j] && len < sizeof r->error; j++)
            len += (size_t)snprintf(r->error + len, sizeof r->error - len, "%s%s", j ? ", " : "",
                                    fl->choices[j]);
        return VKG_FLAGS_USAGE;
    }
    case VKG_FLAG_INT:
    case VKG_FLAG_LL:
    case VKG_FLAG_U64:
        return set_whole(fl, val, r);
    case VKG_FLAG_FLOAT:
    case VKG_FLAG_DOUBLE:
        return set_real(fl, val, r);
    case VKG_FLAG_BOOL:
        break;
    }
    return usage_error(r, "%s takes no value, got '%s'", fl->name, val);
}

int vkg_flags_parse_args(const vkg_flag *flags, int nflags, int argc, char **argv, char **pos,
                         vkg_flags_result *r)
{
    memset(r, 0, sizeof *r);
    if (nflags < 0 || nflags > VKG_FLAGS_MAX)
        return usage_error(r, "internal error: %d flags in one table (at most %d)", nflags,
                           VKG_FLAGS_MAX);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return VKG_FLAGS_HELP;
        if (a[0] != '-') {
            if (!pos)
                return usage_error(r, "unexpected argument '%s' (options start with -)", a);
            pos[r->npos++] = argv[i];
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        int k = -1;
        for (int j = 0; j < nflags && k < 0; j++)
            if (strlen(flags[j].name) == len && !strncmp(flags[j].name, a, len))
                k = j;
        if (k < 0)
            return usage_error(r, "unknown option '%s'", a);
        const vkg_flag *fl = &flags[k];
        r->seen[k] = 1;
        if (fl->type == VKG_FLAG_BOOL) {
            if (eq)
                return usage_error(r, "%s takes no value, got '%s'", fl->name, a);
            *(int *)fl->dst = 1;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val)
            return usage_error(r, "%s needs a value", fl->name);
        int rc = set_value(fl, val, r);
        if (rc != VKG_FLAGS_OK)
            return rc;
    }
    return VKG_FLAGS_OK;
}

int vkg_flags_int_list(const char *s, int lo, int hi, int *out, int cap)
{
    int n = 0;
    for (const char *p = s;; p++) {
        long long v = 0;
        if (*p < '0' || *p > '9' || n == cap)
            return -1;
        for (; *p >= '0' && *p <= '9'; p++)
            if ((v = v * 10 + (*p - '0')) > hi)
                return -1;
        if (v < lo)
            return -1;
        out[n++] = (int)v;
        if (*p == '\0')
            return n;
        if (*p != ',')
            return -1;
    }
}

int vkg_flags_seen(const vkg_flag *flags, int nflags, const vkg_flags_result *r, const char *name)
{
    for (int i = 0; i < nflags && i < VKG_FLAGS_MAX; i++)
        if (!strcmp(flags[i].name, name))
            return r->seen[i];
    return 0;
}

int vkg_flags_parse(const char *cmd, const char *synopsis, const vkg_flag *flags, int nflags,
                    int argc, char **argv, char **pos, vkg_flags_result *r)
{
    vkg_flags_result local;
    if (!r)
        r = &local;
    /* The defaults as they are before parsing: a flag given before --help would change them. */
    char defs[VKG_FLAGS_MAX][DEFAULT_CAP];
    for (int i = 0; i < nflags && i < VKG_FLAGS_MAX; i++)
        vkg_flags_default(&flags[i], defs[i], DEFAULT_CAP);
    int rc = vkg_flags_parse_args(flags, nflags, argc, argv, pos, r);
    if (rc == VKG_FLAGS_HELP)
        print_usage(stdout, cmd, synopsis, flags, nflags, (const char(*)[DEFAULT_CAP])defs);
    else if (rc == VKG_FLAGS_USAGE)
        fprintf(stderr, "vkgpt %s: %s (vkgpt %s --help lists the options)\n", cmd, r->error, cmd);
    return rc;
}
