/* What both systems' vkg_os_glob and vkg_os_list_dir share (see os/glob.h): sorting the paths
 * and freeing them. */
#include <stdlib.h>
#include <string.h>

#include "os/glob.h"

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void vkg_os__paths_sort(vkg_os_paths *p)
{
    if (p->n > 1)
        qsort(p->v, p->n, sizeof *p->v, by_name);
}

void vkg_os_paths_free(vkg_os_paths *p)
{
    if (!p)
        return;
    for (size_t i = 0; p->v && i < p->n; i++)
        free(p->v[i]);
    free(p->v);
    *p = (vkg_os_paths){0};
}
