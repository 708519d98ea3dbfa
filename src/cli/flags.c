/* Flag parsing for the CLI (see flags.h). */
#include "cli/flags.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f, const char *cmd, const char *synopsis, const vkg_flag *flags, int n)
{
    fprintf(f, "usage: vkgpt %s %s\n\noptions:\n", cmd, synopsis);
    for (int i = 0; i < n; i++) {
        const vkg_flag *fl = &flags[i];
        fprintf(f, "  %-16s %s", fl->name, fl->help);
        if (fl->type == VKG_FLAG_CHOICE) {
            fprintf(f, " (");
            for (int j = 0; fl->choices[j]; j++)
                fprintf(f, "%s%s", j ? "|" : "", fl->choices[j]);
            fprintf(f, ")");
        }
        fprintf(f, "\n");
    }
}

static int parse_number(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno)
        return 0;
    if (*end == 'K' || *end == 'k')
        v *= 1024.0, end++;
    else if (*end == 'M' || *end == 'm')
        v *= 1024.0 * 1024.0, end++;
    else if (*end == 'G' || *end == 'g')
        v *= 1024.0 * 1024.0 * 1024.0, end++;
    if (*end || !isfinite(v))
        return 0;
    *out = v;
    return 1;
}

/* Whether v converts to the C type of a numeric flag without overflow (undefined behaviour). */
static int fits_type(vkg_flag_type type, double v)
{
    switch (type) {
    case VKG_FLAG_INT:
        return v >= -2147483648.0 && v <= 2147483647.0;
    case VKG_FLAG_LL:
        return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
    case VKG_FLAG_U64:
        return v >= 0.0 && v < 18446744073709551616.0;
    default:
        return fabs(v) <= FLT_MAX;
    }
}

static int set_value(const char *cmd, const vkg_flag *fl, const char *val)
{
    if (fl->type == VKG_FLAG_STR) {
        *(const char **)fl->dst = val;
        return 1;
    }
    if (fl->type == VKG_FLAG_CHOICE) {
        for (int j = 0; fl->choices[j]; j++)
            if (!strcmp(val, fl->choices[j])) {
                *(int *)fl->dst = j;
                return 1;
            }
        fprintf(stderr, "vkgpt %s: %s: '%s' is not one of ", cmd, fl->name, val);
        for (int j = 0; fl->choices[j]; j++)
            fprintf(stderr, "%s%s", j ? ", " : "", fl->choices[j]);
        fprintf(stderr, "\n");
        return 0;
    }
    double v;
    int integral = fl->type != VKG_FLAG_FLOAT;
    if (!parse_number(val, &v) || (integral && v != floor(v))) {
        fprintf(stderr, "vkgpt %s: %s expects %s, got '%s'\n", cmd, fl->name,
                integral ? "a whole number" : "a number", val);
        return 0;
    }
    if (fl->min < fl->max && (v < fl->min || v > fl->max)) {
        fprintf(stderr, "vkgpt %s: %s must be between %g and %g, got %s\n", cmd, fl->name, fl->min,
                fl->max, val);
        return 0;
    }
    if (fl->type == VKG_FLAG_U64 && v < 0) {
        fprintf(stderr, "vkgpt %s: %s must not be negative: %s\n", cmd, fl->name, val);
        return 0;
    }
    if (!fits_type(fl->type, v)) {
        fprintf(stderr, "vkgpt %s: %s is out of range: %s\n", cmd, fl->name, val);
        return 0;
    }
    switch (fl->type) {
    case VKG_FLAG_INT:
        *(int *)fl->dst = (int)v;
        break;
    case VKG_FLAG_LL:
        *(long long *)fl->dst = (long long)v;
        break;
    case VKG_FLAG_U64:
        *(uint64_t *)fl->dst = (uint64_t)v;
        break;
    default:
        *(float *)fl->dst = (float)v;
        break;
    }
    return 1;
}

int vkg_flags_parse(const char *cmd, const char *synopsis, const vkg_flag *flags, int nflags,
                    int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout, cmd, synopsis, flags, nflags);
            return 1;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const vkg_flag *fl = NULL;
        for (int j = 0; j < nflags && !fl; j++)
            if (strlen(flags[j].name) == len && !strncmp(flags[j].name, a, len))
                fl = &flags[j];
        if (!fl) {
            fprintf(stderr, "vkgpt %s: unknown option '%s' (vkgpt %s --help lists them)\n", cmd, a,
                    cmd);
            return 2;
        }
        if (fl->type == VKG_FLAG_BOOL) {
            *(int *)fl->dst = 1;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val) {
            fprintf(stderr, "vkgpt %s: %s needs a value\n", cmd, fl->name);
            return 2;
        }
        if (!set_value(cmd, fl, val))
            return 2;
    }
    return 0;
}
