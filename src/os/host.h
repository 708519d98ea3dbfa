/* The machine and memory, in the platform layer (src/os; see clock.h): what tells two processes
 * apart as sharing one kernel, and memory at a chosen alignment. */
#ifndef VKG_OS_HOST_H
#define VKG_OS_HOST_H

#include <stddef.h>

/* What names the running kernel and this process's view of it, into out (cap bytes,
 * NUL-terminated): on Linux "boot=<boot id> ipc:[<n>] net:[<n>]" (the boot id and the IPC and
 * network namespaces: two processes that agree share memory and abstract Unix sockets); "" where
 * the system gives no such proof (Windows, macOS) or it cannot be read: then no two processes are
 * known to share a kernel. */
void vkg_os_kernel_identity(char *out, size_t cap);

/* bytes of memory at a multiple of align (a power of two, at least sizeof(void *)), or NULL;
 * free it with vkg_os_aligned_free (Windows' aligned blocks cannot go to free()). */
void *vkg_os_aligned_alloc(size_t align, size_t bytes);
void vkg_os_aligned_free(void *p);

/* The function symbol of the shared library at path (opened once and kept open for the life of
 * the process: dlopen with RTLD_NOW | RTLD_LOCAL; LoadLibrary on Windows), or NULL when the
 * library cannot be opened or lacks it. */
void (*vkg_os_library_function(const char *path, const char *symbol))(void);

/* The Vulkan loader library as this system names it, for messages: "libvulkan.so.1"; on macOS
 * "libvulkan.1.dylib or libMoltenVK.dylib" (volk tries both); "vulkan-1.dll" on Windows. */
const char *vkg_os_vulkan_loader_name(void);

/* What to install on this system when that library is missing (a sentence's tail, no period). */
const char *vkg_os_vulkan_loader_hint(void);

#endif
