/* File-name patterns, POSIX glob(3) (see os/glob.h). */
#define _POSIX_C_SOURCE 200809L
#include "os/glob.h"

#include <glob.h>
#include <stdlib.h>
#include <string.h>

int vkg_os_glob(const char *pattern, vkg_os_paths *out)
{
    *out = (vkg_os_paths){0};
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g); /* sorted unless GLOB_NOSORT */
    if (rc == GLOB_NOMATCH)
        return VKG_OS_GLOB_NOMATCH;
    if (rc != 0)
        return rc == GLOB_NOSPACE ? VKG_OS_GLOB_NOMEM : VKG_OS_GLOB_ERROR;
    int status = VKG_OS_GLOB_OK;
    out->v = calloc(g.gl_pathc ? g.gl_pathc : 1, sizeof *out->v);
    for (size_t i = 0; out->v && i < g.gl_pathc; i++) {
        out->v[i] = strdup(g.gl_pathv[i]);
        if (!out->v[i])
            break;
        out->n = i + 1;
    }
    if (!out->v || out->n < g.gl_pathc) {
        vkg_os_paths_free(out);
        status = VKG_OS_GLOB_NOMEM;
    }
    globfree(&g);
    return status;
}

int vkg_os_glob_has_wildcard(const char *s)
{
    return strpbrk(s, "*?[") != NULL;
}
