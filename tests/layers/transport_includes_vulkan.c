/* An upward include: the transport (host buffers only) reaching the Vulkan device API.
 * tests/check_layers.cmake expects this file not to compile against the transport view. */
#include "vkgpt/device.h"

int vkg_layers_probe(void);
int vkg_layers_probe(void)
{
    return 0;
}
