/* The direct allreduce of the shared-memory segment (transport/shm_direct.c) and the buffers that
 * live in the segment (transport/shm_pool.c): exact results (integer-valued inputs, no element
 * wrong) for 1..8 local ranks, sizes around and above the thresholds (unaligned counts
 * included), f32, bf16 and f16, sum and average, on the single-copy path, with single-copy
 * forced off (VKG_COMM_CMA=0), on buffers in the pools, and with only some ranks' buffers in
 * their pools; every rank bitwise equal and every path bitwise equal to the ZeroMQ path on
 * order-revealing inputs (rank order and the ring's order). Each call asserts, through the
 * per-engine counters of comm_testing.h, which engine ran it, so a fast path that silently never
 * runs fails the test. The pool: allocation, reuse, exhaustion falling back to ordinary memory,
 * misuse, and the layout of 64 ranks' pools. Ranks are forked processes over ipc. (A rank killed
 * during a single-copy allreduce: tests/test_comm_shm.c's fault tests, which assert that engine.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "../transport/comm_testing.h"
#include "test_comm_harness.h"
#include "vkgpt/comm.h"

enum { ENG_ZMQ = -1, ENG_SEGMENT, ENG_CMA, ENG_POOL }; /* vkg__comm_shm_engines indices */
enum { BUF_MALLOC, BUF_POOL, BUF_RANK0_POOL };         /* where each rank's buffers are */

typedef struct plan {
    const size_t *counts;
    int ncounts;
    int dtypes; /* bitmask of 1 << dtype */
    int odd;    /* also the order-revealing inputs (digested only) */
    int bufs;   /* BUF_* */
    int cma;    /* single-copy expected on (1) or off (0); -1: no segment */
} plan;

/* The engine an allreduce of bytes must take. */
static int expected_engine(const plan *p, vkg_th_rank *r, size_t bytes)
{
    int pooled = p->bufs == BUF_POOL;
    if (p->cma < 0 || r->size == 1)
        return ENG_ZMQ;
    if (bytes <= (64u << 10))
        return ENG_SEGMENT;
    if (pooled)
        return ENG_POOL;
    return p->cma && bytes >= VKG_SHM_CMA_MIN_BYTES ? ENG_CMA : ENG_SEGMENT;
}

/* Run one allreduce and check which engine ran it: 0 when as expected. */
static int one_call(vkg_th_rank *r, void *arg, const void *in, void *dst, size_t count,
                    vkg_comm_dtype dt, vkg_comm_op op, vkg_status *st)
{
    const plan *p = arg;
    uint64_t e0[4], e1[4];
    vkg__comm_shm_engines(r->comm, e0);
    *st = vkg_comm_allreduce(r->comm, in, dst, count, dt, op);
    vkg__comm_shm_engines(r->comm, e1);
    int want = expected_engine(p, r, count * vkg_comm_dtype_size(dt));
    for (int k = 0; k < 4; k++)
        if (e1[k] - e0[k] != (uint64_t)(k == want))
            return 1;
    return 0;
}

static void *get_buffer(vkg_th_rank *r, void *arg, size_t bytes)
{
    const plan *p = arg;
    void *b = NULL;
    if (p->bufs == BUF_POOL || (p->bufs == BUF_RANK0_POOL && r->rank == 0)) {
        if (vkg_comm_buffer_alloc(r->comm, bytes, &b) != VKG_OK)
            return NULL;
        if (r->size > 1 && p->cma >= 0 && !vkg_comm_buffer_in_segment(r->comm, b, bytes))
            abort(); /* the plan says pool: the pool must hold it */
        return b;
    }
    return malloc(bytes);
}

static void put_buffer(vkg_th_rank *r, void *arg, void *b)
{
    const plan *p = arg;
    if (p->bufs == BUF_POOL || (p->bufs == BUF_RANK0_POOL && r->rank == 0))
        vkg_comm_buffer_free(r->comm, b);
    else
        free(b);
}

/* Every case of the plan: report "wrong=<n> engine_bad=<n> digest=<hex>". */
static int plan_body(vkg_th_rank *r, void *arg)
{
    const plan *p = arg;
    int wrong = 0, engine_bad = 0;
    uint64_t digest = 0;
    vkg_status st = VKG_OK;
    if (p->cma >= 0 && r->size > 1 && vkg__comm_shm_cma(r->comm) != p->cma) {
        vkg_th_report(r, "single-copy %d, expected %d: %s", vkg__comm_shm_cma(r->comm), p->cma,
                      vkg_comm_path(r->comm));
        return 1;
    }
    vkg_th_sweep sw = {.counts = p->counts,
                       .ncounts = p->ncounts,
                       .dtypes = p->dtypes,
                       .odd = p->odd,
                       .get = get_buffer,
                       .put = put_buffer,
                       .call = one_call,
                       .arg = (void *)p};
    st = vkg_th_sweep_run(r, &sw, &wrong, &engine_bad, &digest);
    vkg_th_report(r, "wrong=%d engine_bad=%d digest=%016llx st=%s %s", wrong, engine_bad,
                  (unsigned long long)digest, vkg_status_name(st), st ? vkg_error_message() : "");
    return st != VKG_OK || wrong != 0 || engine_bad != 0;
}

/* Run plan p on n ranks (environment variable env=value set for them, when given); every rank
 * must pass with the same digest, returned in digest (the report up to " st="). */
static void run_plan(int n, const vkg_th_opts *base, const plan *p, const char *env,
                     const char *value, char *digest, size_t cap)
{
    vkg_th_opts o = *base;
    o.processes = 1;
    o.transport = VKG_COMM_IPC;
    o.shm = p->cma < 0 ? VKG_COMM_SHM_OFF : VKG_COMM_SHM_REQUIRE;
    if (!env && p->cma > 0) /* single-copy is off unless asked for */
        env = "VKG_COMM_CMA", value = "1";
    if (env)
        setenv(env, value, 1);
    vkg_th_result res[VKG_TH_MAX_RANKS];
    vkg_th_run(n, &o, plan_body, (void *)p, res);
    if (env)
        unsetenv(env);
    int ok = 1;
    for (int q = 0; q < n; q++)
        ok &= res[q].create_status == VKG_OK && res[q].body_rc == 0 &&
              strncmp(res[q].report, res[0].report, 54) == 0;
    if (!ok) {
        fprintf(stderr, "%d ranks, buffers %d, single-copy %d, %s=%s:\n", n, p->bufs, p->cma,
                env ? env : "-", value ? value : "-");
        vkg_th_dump(res, n);
    }
    assert_true(ok);
    char *d = strstr(res[0].report, "digest=");
    snprintf(digest, cap, "%.23s", d ? d : "?");
}

/* The same plan on every path: single-copy, single-copy off, pools, some ranks' buffers in
 * pools, and ZeroMQ; every digest the same. */
static void every_path(int n, const vkg_th_opts *o, const size_t *counts, int ncounts, int dtypes)
{
    plan p = {.counts = counts, .ncounts = ncounts, .dtypes = dtypes, .odd = 1};
    char d[5][32];
    p.bufs = BUF_MALLOC, p.cma = 1;
    run_plan(n, o, &p, NULL, NULL, d[0], sizeof d[0]);
    p.cma = 0;
    run_plan(n, o, &p, "VKG_COMM_CMA", "0", d[1], sizeof d[1]);
    p.bufs = BUF_POOL;
    run_plan(n, o, &p, "VKG_COMM_CMA", "0", d[2], sizeof d[2]);
    p.bufs = BUF_RANK0_POOL, p.cma = 1;
    run_plan(n, o, &p, NULL, NULL, d[3], sizeof d[3]);
    p.bufs = BUF_MALLOC, p.cma = -1;
    run_plan(n, o, &p, NULL, NULL, d[4], sizeof d[4]);
    fprintf(stderr, "  %d ranks: cma %s | off %s | pool %s | mixed %s | zmq %s\n", n, d[0], d[1],
            d[2], d[3], d[4]);
    for (int k = 1; k < 5; k++)
        assert_string_equal(d[k], d[0]);
}

/* N = 1..8, sizes below, at and above the thresholds (64 KiB, 256 KiB) in every dtype, unaligned
 * counts; rank order (the default thresholds). */
static void test_every_path_rank_order(void **state)
{
    (void)state;
    static const size_t counts[] = {16385, 65536, 70001, 131071, 300007};
    vkg_th_opts o = {.wall_s = 200};
    for (int n = 1; n <= 8; n++)
        every_path(n, &o, counts, 5, 7);
}

/* The ring's order of additions (ring_min_ranks 3, small_bytes 1 KiB), 3 to 5 ranks. */
static void test_every_path_ring_order(void **state)
{
    (void)state;
    static const size_t counts[] = {70001, 262147};
    vkg_th_opts o = {.ring_min_ranks = 3, .small_bytes = 1024, .wall_s = 200};
    for (int n = 3; n <= 5; n++)
        every_path(n, &o, counts, 2, 1 << VKG_COMM_F32 | 1 << VKG_COMM_BF16);
}

/* 64 MiB of f32 on 2 and 4 ranks: single-copy, and in the pools. */
static void test_large(void **state)
{
    (void)state;
    static const size_t counts[] = {16u << 20};
    vkg_th_opts o = {.wall_s = 200};
    char d[32];
    for (int n = 2; n <= 4; n += 2) {
        plan p = {.counts = counts, .ncounts = 1, .dtypes = 1, .bufs = BUF_MALLOC, .cma = 1};
        run_plan(n, &o, &p, NULL, NULL, d, sizeof d);
        p.bufs = BUF_POOL;
        run_plan(n, &o, &p, NULL, NULL, d, sizeof d);
    }
}

/* ---- the pool ---- */

#define POOL_BYTES (1u << 20)

static int pool_body(vkg_th_rank *r, void *arg)
{
    (void)arg;
    vkg_comm_t *c = r->comm;
    void *b[5] = {0}, *again = NULL, *plain = NULL;
    int bad = 0;
    for (int i = 0; i < 4; i++) /* 4 x 256 KiB fill the 1 MiB pool, first fit, in order */
        bad += vkg_comm_buffer_alloc(c, (256u << 10) - (i == 1 ? 5 : 0), &b[i]) != VKG_OK ||
               !vkg_comm_buffer_in_segment(c, b[i], 256u << 10) || ((uintptr_t)b[i] & 4095) ||
               (i && (uint8_t *)b[i] != (uint8_t *)b[i - 1] + (256u << 10));
    bad += 10 * (vkg_comm_buffer_alloc(c, 4096, &b[4]) != VKG_OK ||
                 vkg_comm_buffer_in_segment(c, b[4], 1));
    bad += 100 * (vkg_comm_buffer_free(c, b[1]) != VKG_OK); /* a hole: reused first fit */
    bad += 100 * (vkg_comm_buffer_alloc(c, 100000, &again) != VKG_OK || again != b[1]);
    bad += 1000 * (vkg_comm_buffer_free(c, b[1]) != VKG_OK);
    bad += 1000 * (vkg_comm_buffer_free(c, b[1]) != VKG_ERR_INVALID_ARG); /* twice */
    bad += 1000 * (vkg_comm_buffer_free(c, (uint8_t *)b[2] + 4096) != VKG_ERR_INVALID_ARG);
    bad += 10000 * (vkg_comm_buffer_alloc(c, 0, &plain) != VKG_ERR_INVALID_ARG ||
                    vkg_comm_buffer_alloc(NULL, 64, &plain) != VKG_OK ||
                    vkg_comm_buffer_free(NULL, plain) != VKG_OK ||
                    vkg_comm_buffer_free(c, NULL) != VKG_OK);
    /* an allreduce of 256 KiB in the pool, then a buffer too large for it: ordinary memory */
    float *x = b[2];
    for (size_t i = 0; i < (64u << 10); i++)
        x[i] = (float)(i % 5 + (size_t)r->rank);
    uint64_t e0[4], e1[4];
    vkg__comm_shm_engines(c, e0);
    vkg_status st = vkg_comm_allreduce(c, x, x, 64u << 10, VKG_COMM_F32, VKG_COMM_SUM);
    vkg__comm_shm_engines(c, e1);
    for (size_t i = 0; i < (64u << 10) && st == VKG_OK; i++)
        bad += 100000 * (x[i] != (float)(2 * (i % 5) + 1));
    bad += 1000000 * (e1[ENG_POOL] != e0[ENG_POOL] + 1);
    /* a freed buffer's pages leave the segment: every rank touched b[2], then frees it */
    vkg_comm_barrier(c);
    uint64_t held = vkg__comm_shm_resident(c);
    vkg_comm_barrier(c);
    bad += 10000000 * (vkg_comm_buffer_free(c, b[2]) != VKG_OK);
    b[2] = NULL;
    vkg_comm_barrier(c);
    uint64_t after = vkg__comm_shm_resident(c);
    if (after + (uint64_t)r->size * (256u << 10) > held)
        bad += 10000000;
    void *big = NULL;
    bad += 10 * (vkg_comm_buffer_alloc(c, 2 * POOL_BYTES, &big) != VKG_OK ||
                 vkg_comm_buffer_in_segment(c, big, 1));
    vkg_comm_buffer_free(c, big);
    for (int i = 0; i < 5; i++)
        if (i != 1)
            bad += 1000 * (vkg_comm_buffer_free(c, b[i]) != VKG_OK);
    vkg_th_report(r, "bad=%d st=%s %s | %s | resident %llu -> %llu bytes", bad, vkg_status_name(st),
                  st ? vkg_error_message() : "", vkg_comm_path(c), (unsigned long long)held,
                  (unsigned long long)after);
    return bad != 0 || st != VKG_OK;
}

static void test_pool(void **state)
{
    (void)state;
    vkg_th_opts o = {
        .transport = VKG_COMM_IPC, .processes = 1, .shm = VKG_COMM_SHM_REQUIRE, .wall_s = 60};
    setenv("VKG_COMM_SHM_POOL", "1M", 1);
    int ok = vkg_th_run_ok(2, &o, pool_body, NULL);
    unsetenv("VKG_COMM_SHM_POOL");
    assert_true(ok);
}

/* The largest segment: 64 ranks with pools of 256 MiB each (16 GiB in all, the cap) and 256 KiB
 * chunks is created, sealed and mapped (sparse: no memory is touched beyond the header). */
static void test_layout_of_64_ranks(void **state)
{
    (void)state;
    vkg_shm_creds cr = {.job_id = 0x5eedull, .generation = 3};
    int fd = -1;
    size_t bytes = 0, want = (size_t)64 * ((256u << 20) + 4 * (256u << 10));
    assert_int_equal(vkg__shm_create_fd(&cr, 64, 256u << 10, 256u << 20, &fd, &bytes), VKG_OK);
    assert_true(bytes > want && bytes < want + (1u << 20));
    uint8_t *base = NULL;
    size_t mapped = 0;
    assert_int_equal(vkg__shm_map(fd, &cr, 64, 256u << 10, &base, &mapped), VKG_OK);
    assert_int_equal(mapped, bytes);
    munmap(base, mapped);
    assert_int_equal(vkg__shm_map(fd, &cr, 63, 256u << 10, &base, &mapped), VKG_ERR_PROTOCOL);
    close(fd);
}

/* ---- what the start-up line says, and bad settings ---- */

static int path_body(vkg_th_rank *r, void *arg)
{
    vkg_th_report(r, "%s", vkg_comm_path(r->comm));
    return strstr(vkg_comm_path(r->comm), arg) == NULL;
}

/* Start 2 ranks with env=value; want: a text of the path, or of create's error (create_fails). */
static void expect_start(const char *env, const char *value, int create_fails, const char *want)
{
    vkg_th_opts o = {.transport = VKG_COMM_IPC,
                     .processes = 1,
                     .shm = VKG_COMM_SHM_REQUIRE,
                     .wall_s = 30,
                     .timeout_ms = 5000};
    vkg_th_result res[2];
    if (value)
        setenv(env, value, 1);
    vkg_th_run(2, &o, path_body, (void *)want, res);
    if (value)
        unsetenv(env);
    fprintf(stderr, "  %s=%s: %s\n", env, value ? value : "(unset)", res[0].report);
    for (int q = 0; q < 2; q++) {
        if (create_fails)
            assert_int_not_equal(res[q].create_status, VKG_OK);
        else
            assert_int_equal(res[q].body_rc, 0);
    }
    assert_non_null(strstr(res[0].report, want));
}

static void test_startup_line(void **state)
{
    (void)state;
    expect_start("VKG_COMM_CMA", "1", 0, "shm (2 ranks on this host, single-copy on from 256 KiB)");
    expect_start("VKG_COMM_CMA", NULL, 0, "single-copy off: not asked for (VKG_COMM_CMA=1)");
    setenv("VKG_COMM_CMA", "1", 1);
    expect_start("VKG_COMM_CMA_MIN", "1M", 0, "single-copy on from 1024 KiB)");
    unsetenv("VKG_COMM_CMA");
    expect_start("VKG_COMM_CMA_MIN", "-4", 1, "VKG_COMM_CMA_MIN='-4' on rank 0 is not a size");
    expect_start("VKG_COMM_CMA", "0", 0, "single-copy off: VKG_COMM_CMA=0 on rank 0");
    expect_start("VKG_COMM_CMA", "yes", 1, "VKG_COMM_CMA='yes' on rank 0 is not 0 or 1");
    expect_start("VKG_COMM_SHM_POOL", "lots", 1, "VKG_COMM_SHM_POOL='lots' is not a size");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_of_64_ranks),
        cmocka_unit_test(test_startup_line),
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_every_path_rank_order),
        cmocka_unit_test(test_every_path_ring_order),
        cmocka_unit_test(test_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
