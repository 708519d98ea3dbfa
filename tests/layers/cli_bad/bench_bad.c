/* A command-line file that reaches into the library past src/cli/internal.h: the include check
 * (tests/check_cli_includes.cmake) must name it. Never compiled. */
#include "cli/cli.h"
#include "ops/ops.h"
#include "vkgpt/device.h"
