/* Collective benchmark of one rank of a multi-host job: every rank runs this program, started by
 * launcher variables (torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...; see
 * vkg_comm_config_from_env), unlike `vkgpt bench allreduce`, which starts its ranks on one host.
 * scripts/hier-netns.sh runs it over network namespaces. Rank 0 prints an nccl-tests style table:
 * size, count, time (slowest rank), algbw, busbw (allreduce: algbw x 2(n-1)/n; broadcast: algbw;
 * allgather, whose size is the whole result: algbw x (n-1)/n), #wrong (integer-valued f32 inputs,
 * so every sum is exact: any wrong element is a bug, whatever the order of additions; broadcast
 * and allgather must deliver every value as sent).
 *
 *   comm_bench [--min BYTES] [--max BYTES] [--iters N] [--warmup N] [--zmq] [--ring-min N]
 *              [--coll allreduce|broadcast|allgather]
 *
 * --zmq turns shared memory off (the flat ZeroMQ path); otherwise the transport picks (two
 * levels when the ranks span hosts and some host holds 2 or more). --ring-min sets
 * ring_min_ranks (2: the flat path uses the ring from 3 ranks up, not the all-to-all engine).
 * --coll picks the collective (allreduce by default; broadcast rotates its root). Exit status: 0
 * when every result was right. Not here: launching the ranks (the script).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vkgpt/comm.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static float input(int r, size_t i)
{
    return (float)((int)((i * 7u + (size_t)r * 13u) % 17u) - 8);
}

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (*end == 'K' || *end == 'k')
        v *= 1024;
    else if (*end == 'M' || *end == 'm')
        v *= 1024 * 1024;
    else if (*end == 'G' || *end == 'g')
        v *= 1024.0 * 1024 * 1024;
    return (size_t)v;
}

enum { AR, BC, AG };

/* Fill buf (bytes of f32) for call k of collective `which` on rank me of n. */
static void fill(float *buf, size_t bytes, int which, int me, int n, int k)
{
    size_t count = bytes / 4, each = count / (size_t)n;
    int root = k % n;
    for (size_t i = 0; i < count; i++)
        buf[i] = which == AR ? input(me, i) : which == BC ? (me == root ? input(root, i) : 0) : 0;
    for (size_t i = 0; which == AG && i < each; i++)
        buf[(size_t)me * each + i] = input(me, i);
}

/* Call k of the collective on buf (bytes of f32: for allgather, the whole result). */
static vkg_status run(vkg_comm_t *c, float *buf, size_t bytes, int which, int k)
{
    int n = vkg_comm_size(c);
    size_t each = bytes / 4 / (size_t)n;
    if (which == AR)
        return vkg_comm_allreduce(c, buf, buf, bytes / 4, VKG_COMM_F32, VKG_COMM_SUM);
    if (which == BC)
        return vkg_comm_broadcast(c, buf, bytes, k % n);
    return vkg_comm_allgather(c, buf + (size_t)vkg_comm_rank(c) * each, each * 4, buf);
}

/* Elements of call k's result that are not what they must be. */
static long count_wrong(const float *buf, size_t bytes, int which, int n, int k)
{
    size_t count = bytes / 4, each = count / (size_t)n;
    long wrong = 0;
    for (size_t i = 0; i < count; i++) {
        float want = 0;
        if (which == AR)
            for (int q = 0; q < n; q++)
                want += input(q, i);
        else if (which == BC)
            want = input(k % n, i);
        else if (i < each * (size_t)n)
            want = input((int)(i / each), i % each);
        else
            continue; /* the allgather's tail past n whole blocks is not part of it */
        wrong += buf[i] != want;
    }
    return wrong;
}

int main(int argc, char **argv)
{
    size_t min = 4096, max = 64u << 20;
    int iters = 20, warmup = 5, zmq_only = 0, ring_min = 0;
    const char *coll = "allreduce";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--zmq"))
            zmq_only = 1;
        else if (i + 1 < argc && !strcmp(argv[i], "--min"))
            min = parse_size(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--max"))
            max = parse_size(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--iters"))
            iters = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--warmup"))
            warmup = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--ring-min"))
            ring_min = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--coll")) {
            coll = argv[++i];
            if (strcmp(coll, "allreduce") && strcmp(coll, "broadcast") &&
                strcmp(coll, "allgather")) {
                fprintf(stderr,
                        "comm_bench: --coll %s: expected allreduce, broadcast or "
                        "allgather\n",
                        coll);
                return 2;
            }
        } else {
            fprintf(stderr,
                    "comm_bench: unknown option %s (--min B, --max B, --iters N, --warmup N, "
                    "--zmq, --ring-min N, --coll C)\n",
                    argv[i]);
            return 2;
        }
    }
    vkg_comm_config cfg;
    vkg_comm_t *c = NULL;
    if (vkg_comm_config_from_env(&cfg, NULL) != VKG_OK) {
        fprintf(stderr, "comm_bench: %s\n", vkg_error_message());
        return 1;
    }
    if (zmq_only)
        cfg.shm = VKG_COMM_SHM_OFF;
    cfg.ring_min_ranks = ring_min;
    if (vkg_comm_create(&cfg, &c) != VKG_OK) {
        fprintf(stderr, "comm_bench: rank %d: %s\n", cfg.rank, vkg_error_message());
        return 1;
    }
    int n = vkg_comm_size(c), me = vkg_comm_rank(c);
    if (me == 0)
        printf("# %s, %d ranks, path: %s\n#%12s %12s %10s %9s %9s %7s\n", coll, n, vkg_comm_path(c),
               "size", "count", "time(us)", "algbw", "busbw", "#wrong");
    float *buf = malloc(max + 4), *times = malloc((size_t)n * sizeof *times);
    long total_wrong = 0;
    vkg_status st = buf && times ? VKG_OK : VKG_ERR_NOMEM;
    int which = !strcmp(coll, "broadcast") ? BC : !strcmp(coll, "allgather") ? AG : AR;
    double factor = which == AR ? 2.0 * (n - 1) / n : which == BC ? 1.0 : (double)(n - 1) / n;
    for (size_t bytes = min; bytes <= max && st == VKG_OK; bytes *= 2) {
        size_t count = bytes / 4;
        int it = bytes > (16u << 20) ? (iters + 3) / 4 : iters;
        for (int k = 0; k < warmup && st == VKG_OK; k++)
            st = run(c, buf, bytes, which, k);
        double spent = 0;
        long wrong = 0;
        for (int k = 0; k < it && st == VKG_OK; k++) {
            fill(buf, bytes, which, me, n, k);
            if (st == VKG_OK)
                st = vkg_comm_barrier(c);
            double t0 = now_s();
            if (st == VKG_OK)
                st = run(c, buf, bytes, which, k);
            spent += now_s() - t0;
            if (st == VKG_OK && k < n) /* broadcast: every root up to n */
                wrong += count_wrong(buf, bytes, which, n, k);
        }
        float mine = (float)(spent / it);
        if (st == VKG_OK)
            st = vkg_comm_allgather(c, &mine, sizeof mine, times);
        long all_wrong = wrong;
        float w = (float)wrong, wsum = 0;
        if (st == VKG_OK)
            st = vkg_comm_allreduce(c, &w, &wsum, 1, VKG_COMM_F32, VKG_COMM_SUM);
        all_wrong = (long)wsum;
        total_wrong += all_wrong;
        float worst = 0;
        for (int q = 0; st == VKG_OK && q < n; q++)
            worst = times[q] > worst ? times[q] : worst;
        double algbw = (double)bytes / worst / 1e9;
        if (me == 0 && st == VKG_OK)
            printf("%13zu %12zu %10.1f %9.3f %9.3f %7ld\n", bytes, count, worst * 1e6, algbw,
                   algbw * factor, all_wrong);
        fflush(stdout);
    }
    if (st != VKG_OK)
        fprintf(stderr, "comm_bench: rank %d: %s\n", me, vkg_error_message());
    free(buf);
    free(times);
    vkg_comm_destroy(&c);
    return st != VKG_OK || total_wrong != 0;
}
