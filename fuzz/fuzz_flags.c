/* Fuzz target: the command-line flag parser (src/cli/flags.c, vkg_flags_parse_args) and the
 * data-parallel flags of `vkgpt train` (src/cli/cmd_launch.c, vkg_cli_dp_resolve). The input is
 * the argument list, arguments separated by NUL bytes. The first table has a flag of every type,
 * with and without a range; the second is train's own data-parallel table. An accepted command
 * line leaves every value inside its flag's range and its C type's, and a resolved data-parallel
 * configuration a rank inside the world. vkg_flags_parse_args neither prints nor exits; the
 * data-parallel resolution may print its own refusals (run with -close_fd_mask=3). */
#include <math.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "fuzz_util.h"
#include "vkgpt/train.h"

#define MAX_ARGS 64

/* main.c's reporter, which the fuzz target does not link. */
int vkg_cli_report(const char *cmd, vkg_status status)
{
    fprintf(stderr, "vkgpt %s: %s: %s\n", cmd, vkg_status_name(status), vkg_error_message());
    return 1;
}

static const char *const choices[] = {"alpha", "beta", "gamma", NULL};

static void every_type(int argc, char **argv)
{
    int i_plain = 0, i_range = 1, choice = 0, boolean = 0;
    long long ll_plain = 0, ll_range = 0;
    uint64_t u64 = 0;
    float f_plain = 0.0f, f_range = 0.0f;
    const char *str = NULL;
    const vkg_flag flags[] = {
        {"--int", VKG_FLAG_INT, &i_plain, "an int", 0, 0, 0},
        {"--int-range", VKG_FLAG_INT, &i_range, "an int in [1, 2^20]", 0, 1, 1 << 20},
        {"--ll", VKG_FLAG_LL, &ll_plain, "a long long", 0, 0, 0},
        {"--ll-range", VKG_FLAG_LL, &ll_range, "a long long in [-1e6, 1e12]", 0, -1e6, 1e12},
        {"--u64", VKG_FLAG_U64, &u64, "a uint64", 0, 0, 0},
        {"--float", VKG_FLAG_FLOAT, &f_plain, "a float", 0, 0, 0},
        {"--float-range", VKG_FLAG_FLOAT, &f_range, "a float in [0, 10]", 0, 0, 10},
        {"--str", VKG_FLAG_STR, &str, "a string", 0, 0, 0},
        {"--choice", VKG_FLAG_CHOICE, &choice, "a choice", choices, 0, 0},
        {"--bool", VKG_FLAG_BOOL, &boolean, "a switch", 0, 0, 0},
    };
    vkg_flags_result r;
    if (vkg_flags_parse_args(flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, NULL, &r) !=
        VKG_FLAGS_OK)
        return;
    FUZZ_REQUIRE(i_range >= 1 && i_range <= 1 << 20);
    FUZZ_REQUIRE(ll_range >= -1000000 && ll_range <= 1000000000000LL);
    FUZZ_REQUIRE(isfinite(f_plain) && f_range >= 0.0f && f_range <= 10.0f);
    FUZZ_REQUIRE(choice >= 0 && choice < 3 && (boolean == 0 || boolean == 1));
    (void)i_plain, (void)ll_plain, (void)u64, (void)str;
}

static void data_parallel(int argc, char **argv)
{
    vkg_cli_dp_flags dp = VKG_CLI_DP_FLAGS_INIT;
    const vkg_flag flags[] = {VKG_CLI_DP_FLAGS(dp)};
    vkg_flags_result r;
    if (vkg_flags_parse_args(flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, NULL, &r) !=
        VKG_FLAGS_OK)
        return;
    vkg_train_config cfg;
    memset(&cfg, 0, sizeof cfg);
    if (vkg_cli_dp_resolve(&dp, &cfg) != 0)
        return;
    const vkg_comm_config *c = &cfg.par.comm;
    FUZZ_REQUIRE(c->world_size >= 1 && c->rank >= 0 && c->rank < c->world_size);
    FUZZ_REQUIRE(c->master_port >= 1 && c->master_port <= 65535 && c->timeout_ms >= 1);
    FUZZ_REQUIRE(memchr(c->master_addr, '\0', sizeof c->master_addr) != NULL);
    if (cfg.par.rank_batch) {
        FUZZ_REQUIRE(cfg.par.rank_batch_count == c->world_size);
        for (int i = 0; i < cfg.par.rank_batch_count; i++)
            FUZZ_REQUIRE(cfg.par.rank_batch[i] >= 1 && cfg.par.rank_batch[i] <= 1 << 20);
    }
    FUZZ_REQUIRE(cfg.par.bucket_bytes == -1 || cfg.par.bucket_bytes >= 0);
    FUZZ_REQUIRE((int)cfg.lr_scale >= 0 && (int)cfg.lr_scale <= 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1), *argv[MAX_ARGS + 2];
    int argc = 0;
    if (!copy)
        abort();
    memcpy(copy, data, size);
    copy[size] = '\0';
    argv[argc++] = "fuzz";
    for (size_t i = 0; i < size && argc <= MAX_ARGS; i += strlen(copy + i) + 1)
        argv[argc++] = copy + i;
    argv[argc] = NULL;
    every_type(argc, argv);
    data_parallel(argc, argv);
    free(copy);
    return 0;
}
