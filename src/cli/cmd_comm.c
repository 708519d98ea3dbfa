/* `vkgpt bench allreduce` (an nccl-tests style bandwidth table for the transport) and
 * `vkgpt keygen` (a CURVE key pair for a job).
 *
 * The benchmark launches N local ranks: processes (this program again, os/spawn.h) for tcp and
 * ipc, threads sharing one context for inproc (Windows has no ipc://).
 * Inputs are integer-valued, so every result is checked exactly; each size reports the slowest
 * rank's mean time. Children are killed and reaped if any rank fails.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "os/clock.h"
#include "os/file.h"
#include "os/net.h"
#include "os/proc.h"
#include "os/spawn.h"
#include "cli/bench_ranks.h"
#include "cli/cli.h"
#include "cli/flags.h"
#include "vkgpt/comm.h"

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        vkg_status try_st_ = (expr);                                                               \
        if (try_st_ != VKG_OK)                                                                     \
            return try_st_;                                                                        \
    } while (0)

typedef struct bench_opts {
    int n;
    vkg_comm_transport transport;
    vkg_comm_shm shm;
    size_t min_bytes, max_bytes;
    int iters, warmup;
    vkg_comm_dtype dtype;
    vkg_comm_op op;
    double timeout_s;
    size_t segment, small, shm_chunk;
    int window;
    int check;
    int bind;
    int ring_min;
    int in_segment; /* buffers from vkg_comm_buffer_alloc (the segment's pool) */
} bench_opts;

typedef struct bench_rank_arg {
    const bench_opts *o;
    vkg_comm_config cfg;
    int rc;
} bench_rank_arg;

static double now_s(void)
{
    return vkg_os_now_ms() / 1e3;
}

/* Integer-valued inputs whose sum over ranks is n * w(i) exactly (the per-rank offsets cancel),
 * so sum and average are exact in fp32 for up to 64 ranks and in bf16 and fp16 for up to 8. */
static float input_value(size_t i, int rank, int n)
{
    float w = (float)((i * 7) % 32);
    int d = rank < n - 1 ? rank : -((n - 1) * (n - 2) / 2);
    return w + (float)d;
}

static float expected_value(size_t i, int n, vkg_comm_op op)
{
    float w = (float)((i * 7) % 32);
    return op == VKG_COMM_AVG ? w : w * (float)n;
}

static uint16_t to_16(float f, vkg_comm_dtype dt)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if (dt == VKG_COMM_BF16)
        return (uint16_t)(u >> 16); /* exact for these small integers */
    /* fp16 of a small integer (|f| < 2048): exact */
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    float a = fabsf(f);
    if (a == 0)
        return sign;
    int e = 0;
    float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    uint16_t man = (uint16_t)((m * 2 - 1) * 1024);
    return (uint16_t)(sign | (uint16_t)((e - 1 + 15) << 10) | man);
}

static void fill_inputs(void *buf, size_t count, const bench_opts *o, int rank)
{
    for (size_t i = 0; i < count; i++) {
        float v = input_value(i, rank, o->n);
        if (o->dtype == VKG_COMM_F32)
            ((float *)buf)[i] = v;
        else
            ((uint16_t *)buf)[i] = to_16(v, o->dtype);
    }
}

static int64_t count_wrong(const void *buf, size_t count, const bench_opts *o)
{
    int64_t wrong = 0;
    for (size_t i = 0; i < count; i++) {
        float want = expected_value(i, o->n, o->op);
        if (o->dtype == VKG_COMM_F32)
            wrong += ((const float *)buf)[i] != want;
        else
            wrong += ((const uint16_t *)buf)[i] != to_16(want, o->dtype);
    }
    return wrong;
}

static int iters_for(const bench_opts *o, size_t bytes)
{
    size_t big = (size_t)16 << 20;
    if (bytes <= big)
        return o->iters;
    int it = (int)((double)o->iters * (double)big / (double)bytes);
    return it < 3 ? 3 : it;
}

static const char *dtype_name(vkg_comm_dtype dt)
{
    return dt == VKG_COMM_F32 ? "float" : dt == VKG_COMM_BF16 ? "bf16" : "half";
}

/* One core's memcpy and a += b bandwidth over buffers far larger than the caches (GB/s of
 * buffer bytes: memcpy reads and writes each byte once, a += b reads two and writes one): the
 * physical limit of copying into a segment and reducing out of it. */
static void core_bandwidth(double *copy_gbs, double *add_gbs)
{
    size_t n = (size_t)16 << 20; /* floats: 64 MiB per buffer */
    float *a = malloc(n * 4), *b = malloc(n * 4);
    *copy_gbs = *add_gbs = 0;
    if (!a || !b) {
        free(a);
        free(b);
        return;
    }
    for (size_t i = 0; i < n; i++)
        a[i] = (float)(i & 7), b[i] = 1.0f;
    double best_c = 1e9, best_a = 1e9;
    for (int r = 0; r < 5; r++) {
        double t = now_s();
        memcpy(a, b, n * 4);
        best_c = fmin(best_c, now_s() - t);
        t = now_s();
        for (size_t i = 0; i < n; i++)
            a[i] += b[i];
        best_a = fmin(best_a, now_s() - t);
    }
    volatile float sink = a[n / 3];
    (void)sink;
    *copy_gbs = (double)(n * 4) / best_c / 1e9;
    *add_gbs = (double)(n * 4) / best_a / 1e9;
    free(a);
    free(b);
}

static void print_header(const bench_opts *o)
{
    printf("# vkgpt bench allreduce: %d ranks, transport %s, %s %s, iters %d (scaled down above "
           "16 MiB, min 3), warmup %d\n",
           o->n, vkg_comm_transport_name(o->transport), dtype_name(o->dtype),
           o->op == VKG_COMM_SUM ? "sum" : "avg", o->iters, o->warmup);
    double cp, add;
    core_bandwidth(&cp, &add);
    printf("# one core: memcpy %.2f GB/s, a += b %.2f GB/s (64 MiB buffers)\n", cp, add);
    printf("# time = slowest rank's mean per call; algbw = size / time; busbw = algbw * 2(n-1)/n\n"
           "#\n");
    printf("# %10s %12s %8s %6s %10s %8s %8s %7s\n", "size", "count", "type", "redop", "time",
           "algbw", "busbw", "#wrong");
    printf("# %10s %12s %8s %6s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)",
           "(GB/s)", "");
    fflush(stdout);
}

/* One size: warm up, time `iters` calls, check, gather the slowest time and the wrong count. */
static vkg_status bench_size(vkg_comm_t *c, const bench_opts *o, size_t bytes, void *send,
                             void *recv, double *sum_busbw, int64_t *total_wrong)
{
    size_t es = vkg_comm_dtype_size(o->dtype), count = bytes / es;
    int n = vkg_comm_size(c), iters = iters_for(o, bytes);
    fill_inputs(send, count, o, vkg_comm_rank(c));
    for (int w = 0; w < o->warmup; w++)
        TRY(vkg_comm_allreduce(c, send, recv, count, o->dtype, o->op));
    TRY(vkg_comm_barrier(c));
    double t0 = now_s();
    for (int it = 0; it < iters; it++)
        TRY(vkg_comm_allreduce(c, send, recv, count, o->dtype, o->op));
    double mine[2] = {(now_s() - t0) / iters, 0}, all[2 * 64];
    if (o->check)
        mine[1] = (double)count_wrong(recv, count, o);
    double *gather = n <= 64 ? all : malloc(sizeof mine * (size_t)n);
    if (!gather)
        return VKG_ERR_NOMEM;
    vkg_status st = vkg_comm_allgather(c, mine, sizeof mine, gather);
    if (st == VKG_OK && vkg_comm_rank(c) == 0) {
        double t = 0, wrong = 0;
        for (int q = 0; q < n; q++) {
            t = gather[2 * q] > t ? gather[2 * q] : t;
            wrong += gather[2 * q + 1];
        }
        double algbw = (double)bytes / t / 1e9, busbw = algbw * 2.0 * (n - 1) / n;
        printf("  %10zu %12zu %8s %6s %10.2f %8.2f %8.2f %7.0f\n", bytes, count,
               dtype_name(o->dtype), o->op == VKG_COMM_SUM ? "sum" : "avg", t * 1e6, algbw, busbw,
               wrong);
        fflush(stdout);
        *sum_busbw += busbw;
        *total_wrong += (int64_t)wrong;
    }
    if (gather != all)
        free(gather);
    return st;
}

static int bench_rank(bench_rank_arg *a)
{
    const bench_opts *o = a->o;
    vkg_comm_t *c = NULL;
    vkg_status st = vkg_comm_create(&a->cfg, &c);
    if (st != VKG_OK)
        return a->rc = vkg_cli_report("bench allreduce", st);
    vkg_comm_t *pool = o->in_segment ? c : NULL; /* NULL: ordinary memory */
    void *send = NULL, *recv = NULL;
    st = vkg_comm_buffer_alloc(pool, o->max_bytes + 64, &send);
    if (st == VKG_OK)
        st = vkg_comm_buffer_alloc(pool, o->max_bytes + 64, &recv);
    double sum_busbw = 0;
    int64_t wrong = 0;
    int nsizes = 0;
    if (st == VKG_OK) {
        memset(recv, 0, o->max_bytes);
        if (a->cfg.rank == 0) {
            print_header(o);
            printf("# collectives over %s; buffers %s\n", vkg_comm_path(c),
                   o->in_segment ? "in the segment's pools" : "in ordinary memory");
        }
        for (size_t b = o->min_bytes; b <= o->max_bytes && st == VKG_OK; b *= 2, nsizes++)
            st = bench_size(c, o, b, send, recv, &sum_busbw, &wrong);
    }
    if (st == VKG_OK && a->cfg.rank == 0) {
        printf("# Out of bounds values : %lld %s\n", (long long)wrong, wrong ? "ERROR" : "OK");
        printf("# Avg bus bandwidth    : %.3f GB/s\n#\n", nsizes ? sum_busbw / nsizes : 0.0);
        fflush(stdout);
    }
    vkg_comm_buffer_free(pool, send);
    vkg_comm_buffer_free(pool, recv);
    if (st != VKG_OK) {
        a->rc = vkg_cli_report("bench allreduce", st);
        vkg_comm_abort(c, "benchmark failed");
    } else {
        a->rc = wrong ? 1 : 0;
    }
    vkg_comm_destroy(&c);
    return a->rc;
}

static void *bench_thread(void *p)
{
    bench_rank(p);
    return NULL;
}

static int run_threads(const bench_opts *o, const vkg_comm_config *base)
{
    vkg_comm_ctx_t *ctx = NULL;
    vkg_status st = vkg_comm_ctx_create(&ctx);
    if (st != VKG_OK)
        return vkg_cli_report("bench allreduce", st);
    bench_rank_arg *args = calloc((size_t)o->n, sizeof *args);
    if (!args) {
        vkg_comm_ctx_destroy(&ctx);
        return vkg_cli_report("bench allreduce", VKG_ERR_NOMEM);
    }
    for (int r = 0; r < o->n; r++) {
        args[r].o = o;
        args[r].cfg = *base;
        args[r].cfg.rank = r;
        args[r].cfg.ctx = ctx;
    }
    st = vkg_cli_bench_run_ranks("bench allreduce", o->n, args, sizeof *args, bench_thread);
    int rc = 0;
    for (int r = 0; st == VKG_OK && r < o->n; r++)
        rc |= args[r].rc;
    free(args);
    vkg_comm_ctx_destroy(&ctx);
    if (st != VKG_OK)
        return vkg_cli_report("bench allreduce", st);
    return rc ? 1 : 0;
}

/* Process ranks: this program again (os/spawn.h), each told its rank and the job's rendezvous
 * in these variables (set by run_processes only); their output passed through as it comes. */
#define RANK_ENV "VKG_BENCH_ALLREDUCE_RANK"
#define JOB_ENV "VKG_BENCH_ALLREDUCE_JOB"
#define PORT_ENV "VKG_BENCH_ALLREDUCE_PORT"
#define IPC_ENV "VKG_BENCH_ALLREDUCE_IPC"

static void pass_through(void *ctx, int k, int s, const char *data, size_t len)
{
    (void)ctx, (void)k;
    if (data) {
        fwrite(data, 1, len, s ? stderr : stdout);
        fflush(s ? stderr : stdout);
    }
}

static int run_processes(const bench_opts *o, const vkg_comm_config *base, int argc, char **argv)
{
    vkg_os_child **cs = calloc((size_t)o->n, sizeof *cs);
    char **args = calloc((size_t)argc + 3, sizeof *args);
    if (!cs || !args) {
        free(cs), free(args);
        return 1;
    }
    args[0] = "vkgpt", args[1] = "bench";
    for (int i = 0; i < argc; i++)
        args[i + 2] = argv[i];
    char rank[48], job[64], port[48], ipc[sizeof base->ipc_dir + 32];
    snprintf(job, sizeof job, JOB_ENV "=%llu", (unsigned long long)base->job_id);
    snprintf(port, sizeof port, PORT_ENV "=%d", base->master_port);
    snprintf(ipc, sizeof ipc, IPC_ENV "=%s", base->ipc_dir);
    const char *env[] = {rank, job, port, ipc, NULL};
    fflush(stdout);
    int rc = 0, started = 0, left = 0;
    for (int r = 0; r < o->n; r++, started++) {
        char err[256];
        snprintf(rank, sizeof rank, RANK_ENV "=%d", r);
        if (vkg_os_spawn_self(args, env, &cs[r], err, sizeof err) != 0) {
            fprintf(stderr, "vkgpt bench allreduce: cannot start rank %d: %s\n", r, err);
            rc = 1;
            break;
        }
    }
    for (int r = 0; r < started; r++)
        if (rc) /* one could not start: the others would wait for it */
            vkg_os_child_stop(cs[r], 1);
    int *done = calloc((size_t)o->n, sizeof *done);
    left = started;
    while (done && left > 0) {
        vkg_os_children_pump(cs, started, 100, pass_through, NULL);
        for (int r = 0; r < started; r++) {
            vkg_os_exit how;
            if (done[r] || !vkg_os_child_ended(cs[r], &how))
                continue;
            done[r] = 1, left--;
            if (how.signal || how.code != 0) {
                if (!rc) /* one rank failed: the others will fail too; make sure they do */
                    for (int q = 0; q < started; q++)
                        if (!done[q])
                            vkg_os_child_stop(cs[q], 0);
                rc = 1;
            }
        }
    }
    while (vkg_os_children_pump(cs, started, 100, pass_through, NULL) > 0) {
    }
    for (int r = 0; r < started; r++)
        vkg_os_child_free(cs[r]);
    free(done), free(cs), free(args);
    return rc;
}

/* A process rank (RANK_ENV set): run it with the parent's rendezvous. */
static int run_as_rank(const bench_opts *o, vkg_comm_config *cfg, const char *rank)
{
    cfg->rank = atoi(rank);
    const char *job = getenv(JOB_ENV), *port = getenv(PORT_ENV), *ipc = getenv(IPC_ENV);
    cfg->job_id = job ? strtoull(job, NULL, 10) : 0;
    cfg->master_port = port ? atoi(port) : 0;
    snprintf(cfg->ipc_dir, sizeof cfg->ipc_dir, "%s", ipc ? ipc : "");
    if (o->bind) { /* like mpirun --bind-to core: rank r on CPU r mod ncpu */
        int e = vkg_os_bind_cpu(cfg->rank);
        if (e)
            fprintf(stderr, "vkgpt bench allreduce: rank %d not pinned to a CPU: %s\n", cfg->rank,
                    strerror(e));
    }
    bench_rank_arg a = {o, *cfg, 0};
    return bench_rank(&a);
}

#define MAX_BENCH_BYTES 17179869184.0 /* 16 GiB: two buffers of --max bytes per rank */

static const char *const dtype_names[] = {"f32", "bf16", "f16", NULL};
static const vkg_comm_dtype dtypes[] = {VKG_COMM_F32, VKG_COMM_BF16, VKG_COMM_F16};
static const char *const op_names[] = {"sum", "avg", NULL};

/* Parse argv into *o: 0 to go on, 1 after --help, 2 on a usage error (printed). */
static int parse_bench(int argc, char **argv, bench_opts *o)
{
    *o = (bench_opts){.n = 2, .iters = 20, .warmup = 5, .timeout_s = 60, .check = 1};
    const char *transport = vkg_os_has_ipc() ? "ipc" : "tcp"; /* Windows' libzmq has no ipc:// */
    o->transport = vkg_os_has_ipc() ? VKG_COMM_IPC : VKG_COMM_TCP;
    o->shm = VKG_COMM_SHM_AUTO;
    long long min_bytes = 4096, max_bytes = 256LL << 20, segment = 0, small = 0, shm_chunk = 0;
    int dtype = 0, op = 0, no_check = 0;
    const vkg_flag flags[] = {
        {"-n", VKG_FLAG_INT, &o->n, "local ranks (default 2)", 0, 1, 64},
        {"--transport", VKG_FLAG_STR, &transport,
         "tcp, ipc or inproc (default ipc, tcp on Windows; shared memory between the ranks when "
         "they allow it), shm (required) or zmq (no shared memory)",
         0, 0, 0},
        {"--min", VKG_FLAG_LL, &min_bytes, "smallest size in bytes, K/M/G suffixes (default 4K)", 0,
         1, MAX_BENCH_BYTES},
        {"--max", VKG_FLAG_LL, &max_bytes, "largest size in bytes (default 256M)", 0, 1,
         MAX_BENCH_BYTES},
        {"--iters", VKG_FLAG_INT, &o->iters, "timed calls per size (default 20, fewer above 16M)",
         0, 1, 1000000},
        {"--warmup", VKG_FLAG_INT, &o->warmup, "untimed calls first (default 5)", 0, 0, 1000000},
        {"--dtype", VKG_FLAG_CHOICE, &dtype, "element type (default f32)", dtype_names, 0, 0},
        {"--op", VKG_FLAG_CHOICE, &op, "reduction (default sum)", op_names, 0, 0},
        {"--timeout", VKG_FLAG_DOUBLE, &o->timeout_s, "seconds a collective may wait (default 60)",
         0, 0.001, 86400},
        {"--segment", VKG_FLAG_LL, &segment, "pipeline segment in bytes (default: the transport's)",
         0, 1, MAX_BENCH_BYTES},
        {"--window", VKG_FLAG_INT, &o->window, "segments in flight (default: the transport's)", 0,
         2, 1024},
        {"--small", VKG_FLAG_LL, &small,
         "largest size sent straight to each chunk's owner (default: the transport's)", 0, 1,
         MAX_BENCH_BYTES},
        {"--shm-chunk", VKG_FLAG_LL, &shm_chunk,
         "bytes of a buffer one step of the shared-memory pipeline moves (default: the "
         "transport's)",
         0, 4096, 64 << 20},
        {"--bind", VKG_FLAG_BOOL, &o->bind, "pin process rank r to CPU r mod ncpu", 0, 0, 0},
        {"--ring-min", VKG_FLAG_INT, &o->ring_min,
         "ranks from which large allreduces use the ring (default: the transport's)", 0, 2, 64},
        {"--no-check", VKG_FLAG_BOOL, &no_check, "do not check the results", 0, 0, 0},
        {"--in-segment", VKG_FLAG_BOOL, &o->in_segment,
         "buffers from vkg_comm_buffer_alloc (the segment's pools, read in place)", 0, 0, 0},
    };
    int rc = vkg_flags_parse("bench allreduce",
                             "-n N [options]\n  Launches N local ranks (processes for tcp and ipc, "
                             "threads for inproc) and prints an\n  nccl-tests style table from "
                             "--min to --max bytes, doubling.",
                             flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, NULL, NULL);
    if (rc)
        return rc;
    if (vkg_comm_transport_select(transport, &o->transport, &o->shm) != VKG_OK) {
        fprintf(stderr,
                "vkgpt bench allreduce: --transport must be tcp, ipc, inproc, shm or zmq, got "
                "'%s'\n",
                transport);
        return 2;
    }
    o->min_bytes = (size_t)min_bytes, o->max_bytes = (size_t)max_bytes;
    o->segment = (size_t)segment, o->small = (size_t)small, o->shm_chunk = (size_t)shm_chunk;
    o->dtype = dtypes[dtype];
    o->op = op ? VKG_COMM_AVG : VKG_COMM_SUM;
    o->check = !no_check;
    size_t es = vkg_comm_dtype_size(o->dtype);
    if (o->min_bytes < es || o->max_bytes < o->min_bytes) {
        fprintf(stderr, "vkgpt bench allreduce: need %zu <= --min <= --max\n", es);
        return 2;
    }
    if (o->dtype != VKG_COMM_F32 && o->n > 8) {
        fprintf(stderr, "vkgpt bench allreduce: bf16 and f16 need -n <= 8 (the exact check "
                        "needs sums that 16-bit floats hold exactly)\n");
        return 2;
    }
    return 0;
}

int vkg_cli_bench_allreduce(int argc, char **argv)
{
    bench_opts o;
    int rc = parse_bench(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;
    vkg_comm_tune_malloc();
    vkg_comm_config base;
    vkg_comm_config_default(&base);
    base.world_size = o.n;
    base.transport = o.transport;
    base.shm = o.shm;
    base.shm_chunk_bytes = o.shm_chunk;
    base.timeout_ms = (int)(o.timeout_s * 1000);
    base.segment_bytes = o.segment;
    base.small_bytes = o.small;
    base.window = o.window;
    base.ring_min_ranks = o.ring_min;
    const char *as_rank = getenv(RANK_ENV);
    if (as_rank && o.transport != VKG_COMM_INPROC)
        return run_as_rank(&o, &base, as_rank);
    base.job_id = ((uint64_t)vkg_os_pid() << 32) ^ (uint64_t)time(NULL) ^ 0x5eed;
    char dir[64] = "";
    if (o.transport == VKG_COMM_TCP) {
        vkg_status st = vkg_comm_pick_port("127.0.0.1", &base.master_port);
        if (st != VKG_OK)
            return vkg_cli_report("bench allreduce", st);
    } else if (o.transport == VKG_COMM_IPC) {
        snprintf(dir, sizeof dir, "/tmp/vkgpt-bench-XXXXXX");
        int e = vkg_os_mkdtemp(dir);
        if (e) {
            fprintf(stderr, "vkgpt bench allreduce: cannot make %s: %s\n", dir, strerror(e));
            return 1;
        }
        snprintf(base.ipc_dir, sizeof base.ipc_dir, "%s", dir);
    }
    char pool[32]; /* --in-segment: pools that hold both buffers, unless the user sized them */
    snprintf(pool, sizeof pool, "%zu", 2 * (o.max_bytes + 64) + (64u << 10));
    if (o.in_segment)
        vkg_os_setenv("VKG_COMM_SHM_POOL", pool, 0);
    rc = o.transport == VKG_COMM_INPROC ? run_threads(&o, &base)
                                        : run_processes(&o, &base, argc, argv);
    if (dir[0])
        vkg_os_rmdir(dir);
    return rc;
}

int vkg_cli_keygen(int argc, char **argv)
{
    const char *path = "vkgpt.key";
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc) {
            path = argv[++i];
        } else {
            FILE *f = !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h") ? stdout : stderr;
            fprintf(f, "usage: vkgpt keygen [-o FILE]   (default vkgpt.key)\n"
                       "Writes a CURVE key pair to FILE (mode 0600) and its public key to "
                       "FILE.pub.\nGive every rank the key file: VKG_COMM_CURVE_KEY=FILE.\n");
            return f == stdout ? 0 : 2;
        }
    }
    if (!vkg_comm_has_curve()) {
        fprintf(stderr, "vkgpt keygen: this libzmq was built without CURVE support\n");
        return 1;
    }
    char pub[VKG_COMM_KEY_CHARS + 1], sec[VKG_COMM_KEY_CHARS + 1];
    vkg_status st = vkg_comm_curve_keypair(pub, sec);
    if (st == VKG_OK)
        st = vkg_comm_keyfile_write(path, pub, sec);
    if (st != VKG_OK)
        return vkg_cli_report("keygen", st);
    printf("wrote %s (secret, mode 0600) and %s.pub\npublic key: %s\n", path, path, pub);
    return 0;
}
