/* Probe for tests/check_os_headers.cmake: a POSIX header outside the platform layer, which the
 * check must find (never compiled). */
#include <stdio.h>
#include <unistd.h>
#include <vulkan/vulkan.h>
