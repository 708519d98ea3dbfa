/* The machine and memory, POSIX (see os/host.h). */
#define _POSIX_C_SOURCE 200809L
#include "os/host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dlfcn.h>

/* First line of a small file, without its newline; "" when unreadable. */
static void read_line(const char *path, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (!fgets(out, (int)cap, f))
        out[0] = '\0';
    fclose(f);
    out[strcspn(out, "\r\n")] = '\0';
}

static void read_link(const char *path, char *out, size_t cap)
{
    ssize_t n = readlink(path, out, cap - 1);
    out[n > 0 ? (size_t)n : 0] = '\0';
}

void vkg_os_kernel_identity(char *out, size_t cap)
{
    char boot[48], ipc[40], net[40];
    read_line("/proc/sys/kernel/random/boot_id", boot, sizeof boot);
    read_link("/proc/self/ns/ipc", ipc, sizeof ipc);
    read_link("/proc/self/ns/net", net, sizeof net);
    int n = boot[0] && ipc[0] && net[0] ? snprintf(out, cap, "boot=%s %s %s", boot, ipc, net) : -1;
    if (cap && (n < 0 || (size_t)n >= cap))
        out[0] = '\0';
}

void *vkg_os_aligned_alloc(size_t align, size_t bytes)
{
    void *p = NULL;
    return posix_memalign(&p, align, bytes) == 0 ? p : NULL;
}

void vkg_os_aligned_free(void *p)
{
    free(p);
}

const char *vkg_os_vulkan_loader_name(void)
{
#if defined(__APPLE__)
    return "libvulkan.1.dylib or libMoltenVK.dylib";
#else
    return "libvulkan.so.1";
#endif
}

const char *vkg_os_vulkan_loader_hint(void)
{
#if defined(__APPLE__)
    return "install MoltenVK (Homebrew: brew install molten-vk) or the Vulkan SDK";
#else
    return "install libvulkan1 (Debian/Ubuntu) or the Vulkan SDK";
#endif
}

void (*vkg_os_library_function(const char *path, const char *symbol))(void)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return NULL;
    void (*fn)(void);
    *(void **)&fn = dlsym(lib, symbol); /* POSIX's way from an object pointer to a function's */
    return fn;
}
