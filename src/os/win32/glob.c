/* File-name patterns, Windows: FindFirstFileA over the pattern's last component (see os/glob.h).
 * '*' and '?' as FindFirstFile reads them; no '[...]'; folder names must be literal. */
#include "os/glob.h"

#include <stdlib.h>
#include <string.h>
#include <windows.h>

/* Append dir + name to out (grown as needed); 0 when memory ran out. */
static int add(vkg_os_paths *out, size_t *cap, const char *pattern, size_t dirlen, const char *name)
{
    if (out->n == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        char **v = realloc(out->v, c * sizeof *v);
        if (!v)
            return 0;
        out->v = v, *cap = c;
    }
    size_t len = strlen(name);
    char *p = malloc(dirlen + len + 1);
    if (!p)
        return 0;
    memcpy(p, pattern, dirlen);
    memcpy(p + dirlen, name, len + 1);
    out->v[out->n++] = p;
    return 1;
}

int vkg_os_glob(const char *pattern, vkg_os_paths *out)
{
    *out = (vkg_os_paths){0};
    const char *last = pattern;
    for (const char *s = pattern; *s; s++)
        if (*s == '/' || *s == '\\')
            last = s + 1;
    size_t dirlen = (size_t)(last - pattern);
    for (size_t i = 0; i < dirlen; i++)
        if (pattern[i] == '*' || pattern[i] == '?')
            return VKG_OS_GLOB_ERROR;
    if (!strpbrk(last, "*?")) { /* a plain path: itself, when it exists */
        if (GetFileAttributesA(pattern) == INVALID_FILE_ATTRIBUTES)
            return VKG_OS_GLOB_NOMATCH;
        size_t cap = 0;
        if (!add(out, &cap, pattern, strlen(pattern), "")) {
            vkg_os_paths_free(out);
            return VKG_OS_GLOB_NOMEM;
        }
        return VKG_OS_GLOB_OK;
    }
    WIN32_FIND_DATAA fd;
    HANDLE h = FindFirstFileA(pattern, &fd);
    if (h == INVALID_HANDLE_VALUE)
        return GetLastError() == ERROR_FILE_NOT_FOUND || GetLastError() == ERROR_PATH_NOT_FOUND
                   ? VKG_OS_GLOB_NOMATCH
                   : VKG_OS_GLOB_ERROR;
    size_t cap = 0;
    int status = VKG_OS_GLOB_OK;
    do {
        if (!strcmp(fd.cFileName, ".") || !strcmp(fd.cFileName, ".."))
            continue;
        if (!add(out, &cap, pattern, dirlen, fd.cFileName)) {
            status = VKG_OS_GLOB_NOMEM;
            break;
        }
    } while (FindNextFileA(h, &fd));
    FindClose(h);
    if (status != VKG_OS_GLOB_OK || out->n == 0) {
        vkg_os_paths_free(out);
        return status != VKG_OS_GLOB_OK ? status : VKG_OS_GLOB_NOMATCH;
    }
    vkg_os__paths_sort(out);
    return VKG_OS_GLOB_OK;
}

int vkg_os_glob_has_wildcard(const char *s)
{
    return strpbrk(s, "*?") != NULL;
}
