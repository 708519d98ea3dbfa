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

const char *vkg_os_vulkan_loader_name(void)
{
    return "vulkan-1.dll";
}

const char *vkg_os_vulkan_loader_hint(void)
{
    return "install your GPU's driver or the Vulkan SDK (vulkan.lunarg.com)";
}

void (*vkg_os_library_function(const char *path, const char *symbol))(void)
{
    HMODULE lib = LoadLibraryA(path);
    return lib ? (void (*)(void))GetProcAddress(lib, symbol) : NULL;
}
