/* The machine and memory, Windows (see os/host.h). */
#include "os/host.h"

#include <malloc.h>
#include <windows.h>

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

void (*vkg_os_library_function(const char *path, const char *symbol))(void)
{
    HMODULE lib = LoadLibraryA(path);
    return lib ? (void (*)(void))GetProcAddress(lib, symbol) : NULL;
}
