/* `vkgpt bench <what>`: benchmarks that print figures (never assert them). Dispatches to the
 * benchmark of each area. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

typedef struct bench_entry {
    const char *name;
    vkg_cli_fn run;
    const char *summary;
} bench_entry;

static const bench_entry benches[] = {
    {"ops", vkg_cli_bench_ops,
     "time every op's shader per shape (timestamp queries), each fused form beside its pair (fp32, "
     "bf16), and the driver's pipeline statistics"},
    {"train", vkg_cli_bench_train, "tokens/s, ms/step, per-op times and memory of a GPT-2 step"},
    {"allreduce", vkg_cli_bench_allreduce, "allreduce over N local ranks (nccl-tests table)"},
    {"dp", vkg_cli_bench_dp, "data-parallel step: compute vs exposed allreduce, N = 1, 2, 4"},
    {"pp", vkg_cli_bench_pp, "pipeline schedules: per-stage busy and idle time, bubble vs theory"},
};

#define NBENCH (sizeof benches / sizeof benches[0])

int vkg_cli_bench(int argc, char **argv)
{
    if (argc >= 2) {
        for (size_t i = 0; i < NBENCH; i++)
            if (!strcmp(argv[1], benches[i].name))
                return benches[i].run(argc - 1, argv + 1);
    }
    FILE *f = argc >= 2 && strcmp(argv[1], "--help") && strcmp(argv[1], "-h") ? stderr : stdout;
    if (f == stderr)
        fprintf(stderr, "vkgpt bench: unknown benchmark '%s'\n", argc >= 2 ? argv[1] : "");
    fprintf(f, "usage: vkgpt bench <benchmark> [options]\n\nbenchmarks:\n");
    for (size_t i = 0; i < NBENCH; i++)
        fprintf(f, "  %-10s %s\n", benches[i].name, benches[i].summary);
    return f == stderr ? 2 : 0;
}
