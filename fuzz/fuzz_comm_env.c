/* Fuzz target: the launcher-variable parser (transport/config_env.c, vkg_comm_config_from_env). The
 * input is the environment, one NAME=value entry per line. VKG_COMM_CURVE_KEY names a key file,
 * which this target does not read: entries of it are dropped, so no input touches the file
 * system. An accepted environment gives a rank inside the world, a port, a positive timeout and
 * NUL-terminated strings. */
#include <string.h>

#include "fuzz_util.h"
#include "vkgpt/comm.h"

#define MAX_VARS 64

static int terminated(const char *s, size_t cap)
{
    return memchr(s, '\0', cap) != NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1), *envp[MAX_VARS + 1];
    int n = 0;
    if (!copy)
        abort();
    memcpy(copy, data, size);
    copy[size] = '\0';
    for (char *line = copy, *end = copy + size; line < end && n < MAX_VARS;) {
        char *nl = memchr(line, '\n', (size_t)(end - line));
        if (nl)
            *nl = '\0';
        if (strncmp(line, "VKG_COMM_CURVE_KEY=", 19) != 0)
            envp[n++] = line;
        line = nl ? nl + 1 : end;
    }
    envp[n] = NULL;
    vkg_comm_config cfg;
    vkg_status st = vkg_comm_config_from_env(&cfg, envp);
    if (st != VKG_OK) {
        FUZZ_REQUIRE(vkg_error_message()[0] != '\0');
    } else {
        FUZZ_REQUIRE(cfg.world_size >= 1 && cfg.rank >= 0 && cfg.rank < cfg.world_size);
        FUZZ_REQUIRE(cfg.local_rank >= 0 && cfg.local_rank < cfg.world_size);
        FUZZ_REQUIRE(cfg.master_port >= 1 && cfg.master_port <= 65535);
        FUZZ_REQUIRE(cfg.timeout_ms >= 1);
        FUZZ_REQUIRE(cfg.transport == VKG_COMM_TCP || cfg.transport == VKG_COMM_IPC);
        FUZZ_REQUIRE(cfg.master_addr[0] != '\0' && terminated(cfg.master_addr, VKG_COMM_ADDR_MAX));
        FUZZ_REQUIRE(terminated(cfg.bind_addr, VKG_COMM_ADDR_MAX));
        FUZZ_REQUIRE(terminated(cfg.ipc_dir, VKG_COMM_ADDR_MAX));
        FUZZ_REQUIRE(terminated(cfg.curve_authorized_file, VKG_COMM_ADDR_MAX));
    }
    free(copy);
    return 0;
}
