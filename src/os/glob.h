/* File-name patterns, in the platform layer (src/os; see clock.h). */
#ifndef VKG_OS_GLOB_H
#define VKG_OS_GLOB_H

#include <stddef.h>

/* The paths a pattern matched, sorted by name (byte order), each malloc'ed. */
typedef struct vkg_os_paths {
    char **v;
    size_t n;
} vkg_os_paths;

/* vkg_os_glob's outcomes. */
enum { VKG_OS_GLOB_OK = 0, VKG_OS_GLOB_NOMATCH = 1, VKG_OS_GLOB_ERROR = 2, VKG_OS_GLOB_NOMEM = 3 };

/* Expand pattern ('*' and '?' in any component on POSIX, also '[...]'; on Windows in its last
 * component only, and a pattern with a wildcard in a folder name is VKG_OS_GLOB_ERROR) into *out
 * (zeroed on anything but VKG_OS_GLOB_OK). A pattern without wildcards matches the one path when
 * it exists. Free the result with vkg_os_paths_free. */
int vkg_os_glob(const char *pattern, vkg_os_paths *out);

/* Free what vkg_os_glob gave and zero *p (NULL-safe). */
void vkg_os_paths_free(vkg_os_paths *p);

/* Sort p's paths by name (byte order): the implementations' common step. */
void vkg_os__paths_sort(vkg_os_paths *p);

/* 1 when s holds a wildcard that vkg_os_glob expands. */
int vkg_os_glob_has_wildcard(const char *s);

#endif
