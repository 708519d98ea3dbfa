/* The rank threads and the token shard of the benchmarks (see bench_ranks.h). */
#include "cli/bench_ranks.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "os/file.h"
#include "os/thread.h"
#include "cli/cli.h"
#include "vkgpt/io.h"

vkg_status vkg_cli_bench_run_ranks(const char *what, int n, void *jobs, size_t stride,
                                   void *(*fn)(void *))
{
    vkg_os_thread **th = calloc((size_t)n, sizeof *th);
    if (!th)
        return VKG_ERR_NOMEM;
    for (int r = 0; r < n; r++)
        if (vkg_os_thread_start(&th[r], fn, (char *)jobs + (size_t)r * stride) != 0) {
            fprintf(stderr, "vkgpt %s: cannot start the thread of rank %d\n", what, r);
            abort();
        }
    for (int r = 0; r < n; r++)
        vkg_os_thread_join(th[r], NULL);
    free(th);
    return VKG_OK;
}

void vkg_cli_bench_rank_error(char *err, size_t cap)
{
    snprintf(err, cap, "%s", vkg_cli_verbose() ? vkg_error_message() : vkg_error_text());
}

int vkg_cli_bench_shard(const char *what, size_t n, int vocab, char *path, size_t cap)
{
    char dir[512];
    vkg_os_temp_dir(dir, sizeof dir);
    snprintf(path, cap, "%s/vkgpt_bench_%d.bin", dir, (int)vkg_os_pid());
    uint16_t *tok = malloc(n * sizeof *tok);
    if (!tok)
        return vkg_cli_report(what, VKG_ERR_NOMEM);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        tok[i] = (uint16_t)(x % (uint64_t)vocab);
    }
    vkg_status st = vkg_shard_write(path, tok, n);
    free(tok);
    return st == VKG_OK ? 0 : vkg_cli_report(what, st);
}
