/* The runtime (src/vk) publishes a device's capabilities; the ops choose their kernels from them
 * (src/ops/tuning.h). The vk view must not see the ops' tuning. */
#include "ops/tuning.h"
