/* The machine and memory, Windows (see os/host.h). */
#include "os/host.h"

#include <malloc.h>

void vkg_os_kernel_identity(char *out, size_t cap)
{
    if (cap)
        out[0] = '\0';
}

void *vkg_os_aligned_alloc(size_t align, size_t bytes)
{
    return _aligned_malloc(bytes, align);
}

void vkg_os_aligned_free(void *p)
{
    _aligned_free(p);
}
