/* Probe for tests/check_os_headers.cmake: a POSIX header and a platform #if outside the platform
 * layer, which the check must find (never compiled). */
#include <stdio.h>
#include <unistd.h>
#include <vulkan/vulkan.h>

#if defined(_WIN32)
#endif
