/* Shared memory between the ranks of one host (transport/shm*.c): the path each policy picks;
 * exact allreduce results (integer-valued inputs, no element wrong) for 1..8 local ranks, sizes
 * 0, 1, 3, 4 KiB, unaligned, several pipeline steps and up to 64 MiB, f32, bf16 and f16, sum and
 * average; every rank bitwise equal, and bitwise equal to the ZeroMQ path on inputs where the
 * order of additions shows (rank order, and the ring's order from ring_min_ranks on); broadcast
 * and allgather; ZeRO's bf16 reduce-scatter through the slots and the pools, bitwise the bf16
 * allreduce's chunk and an independent reference; the handover refusing a process of another job or
 * without the secret; and a rank killed (SIGKILL) or frozen (SIGSTOP) in a large allreduce, or
 * aborting, named on every other rank within twice the timeout. Ranks are forked processes over ipc
 * (or threads where said). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../transport/comm_testing.h"
#include "test_comm_harness.h"
#include "vkgpt/comm.h"

/* ---- the exact-results body ---- */

typedef struct sweep {
    const size_t *counts;
    int ncounts;
    int dtypes; /* bitmask of 1 << dtype */
    int odd;    /* also the order-revealing inputs (digested, compared with the other path) */
    int expect_shm;
    int pool; /* zero_body: buffers from vkg_comm_buffer_alloc (the calls run in the pools) */
} sweep;

/* Run every case; report "wrong=<n> digest=<hex>" and the path. */
static int sweep_body(vkg_th_rank *r, void *arg)
{
    const sweep *s = arg;
    int wrong = 0;
    uint64_t digest = 0;
    vkg_status st = VKG_OK;
    if (vkg_comm_uses_shm(r->comm) != s->expect_shm) {
        vkg_th_report(r, "path %s, expected %s", vkg_comm_path(r->comm),
                      s->expect_shm ? "shm" : "zmq");
        return 1;
    }
    vkg_th_sweep sw = {
        .counts = s->counts, .ncounts = s->ncounts, .dtypes = s->dtypes, .odd = s->odd};
    int bad = 0;
    st = vkg_th_sweep_run(r, &sw, &wrong, &bad, &digest);
    vkg_th_report(r, "wrong=%d digest=%016llx st=%s %s", wrong, (unsigned long long)digest,
                  vkg_status_name(st), st ? vkg_error_message() : "");
    return st != VKG_OK || wrong != 0;
}

/* Run the sweep on n ranks with policy shm; every rank must succeed with the same digest, which
 * is copied to digest_out (the report up to " st="). */
static void run_sweep(int n, vkg_comm_shm shm, const vkg_th_opts *base, const sweep *s,
                      char *digest_out, size_t cap)
{
    vkg_th_opts o = *base;
    o.shm = shm;
    sweep sw = *s;
    sw.expect_shm = shm != VKG_COMM_SHM_OFF && n > 1;
    vkg_th_result res[VKG_TH_MAX_RANKS];
    vkg_th_run(n, &o, sweep_body, &sw, res);
    int ok = 1;
    for (int q = 0; q < n; q++) {
        ok &= res[q].create_status == VKG_OK && res[q].body_rc == 0;
        ok &= strncmp(res[q].report, res[0].report, 40) == 0; /* wrong=0 digest=... */
    }
    if (!ok) {
        fprintf(stderr, "%d ranks, %s:\n", n, vkg_comm_shm_name(shm));
        vkg_th_dump(res, n);
    }
    assert_true(ok);
    snprintf(digest_out, cap, "%.40s", res[0].report);
}

static void compare_paths(int n, const vkg_th_opts *o, const sweep *s)
{
    char a[64], b[64];
    run_sweep(n, VKG_COMM_SHM_REQUIRE, o, s, a, sizeof a);
    run_sweep(n, VKG_COMM_SHM_OFF, o, s, b, sizeof b);
    fprintf(stderr, "  %d ranks: shm %s | zmq %s\n", n, a, b);
    assert_string_equal(a, b);
}

/* N = 1..8 local ranks, the small and awkward sizes, every dtype and op; bitwise the ZeroMQ
 * path's result, which for these sizes adds in rank order. */
static void test_exact_and_like_zmq(void **state)
{
    (void)state;
    static const size_t counts[] = {0, 1, 3, 1024, 1000, 70001};
    const sweep s = {.counts = counts, .ncounts = 6, .dtypes = 7, .odd = 1};
    vkg_th_opts o = {.transport = VKG_COMM_IPC, .processes = 1, .wall_s = 120};
    for (int n = 1; n <= 8; n++)
        compare_paths(n, &o, &s);
}

/* Many pipeline steps (4 KiB chunks, so slots are reused many times) with counts that end
 * mid-chunk and mid-slice; and the ring's order of additions (ring_min_ranks 3, small_bytes
 * 1 KiB), which both paths must follow. Threads as ranks over tcp. */
static void test_pipeline_and_ring_order(void **state)
{
    (void)state;
    static const size_t counts[] = {4093, 100003, 262147};
    const sweep s = {.counts = counts, .ncounts = 3, .dtypes = 7, .odd = 1};
    for (int n = 2; n <= 5; n++) {
        vkg_th_opts o = {.transport = VKG_COMM_TCP,
                         .shm_chunk_bytes = 4096,
                         .ring_min_ranks = 3,
                         .small_bytes = 1024,
                         .segment_bytes = 16384,
                         .wall_s = 120};
        compare_paths(n, &o, &s);
    }
}

/* ---- ZeRO's reduce-scatter and allgatherv ---- */

/* Uneven chunks (one empty) of count elements for n ranks. */
static void zero_bounds(size_t count, int n, size_t *b)
{
    b[0] = 0;
    for (int q = 1; q < n; q++)
        b[q] = q == 1 ? 0 : count / (size_t)n * (size_t)q + (size_t)q * 13 % 7;
    b[n] = count;
    for (int q = 1; q <= n; q++)
        b[q] = b[q] < b[q - 1] ? b[q - 1] : b[q] > count ? count : b[q];
}

/* For each count: reduce-scatter (order-revealing, then integer inputs, checked exactly in this
 * rank's chunk), then allgatherv of the result; digests of every buffer. With expect_shm, each
 * call must advance the segment's steps (it ran in the segment), otherwise leave them alone. */
static int zero_body(vkg_th_rank *r, void *arg)
{
    const sweep *s = arg;
    int n = r->size, wrong = 0, path_bad = 0;
    uint64_t digest = 0;
    vkg_status st = VKG_OK;
    for (int ci = 0; ci < s->ncounts && st == VKG_OK; ci++) {
        size_t count = s->counts[ci], b[VKG_TH_MAX_RANKS + 1];
        zero_bounds(count, n, b);
        float *buf = NULL;
        if (s->pool)
            st = vkg_comm_buffer_alloc(r->comm, count * 4 + 4, (void **)&buf);
        else
            buf = malloc(count * 4 + 4);
        /* in the pools every call above 64 KiB runs there, the others through the slots */
        uint64_t in_pool = s->pool && s->expect_shm && count * 4 > (64u << 10), e0[4], e1[4];
        for (int odd = 1; odd >= 0 && st == VKG_OK; odd--) {
            vkg_th_fill(buf, count, VKG_COMM_F32, r->rank, odd);
            uint32_t s0 = vkg__comm_shm_steps(r->comm);
            vkg__comm_shm_engines(r->comm, e0);
            st = vkg_comm_reduce_scatter(r->comm, buf, count, b);
            uint32_t s1 = vkg__comm_shm_steps(r->comm);
            if (st == VKG_OK)
                st = vkg_comm_allgatherv(r->comm, buf, count, b);
            uint32_t s2 = vkg__comm_shm_steps(r->comm);
            vkg__comm_shm_engines(r->comm, e1);
            path_bad += s->expect_shm ? (s1 == s0 || s2 == s1) : (s1 != s0 || s2 != s1);
            path_bad += e1[3] - e0[3] != 2 * in_pool;
            if (st != VKG_OK)
                break;
            digest = digest * 1099511628211ull ^ vkg_th_digest(buf, count * 4);
            for (size_t i = 0; !odd && i < count; i++) {
                float want = 0;
                for (int q = 0; q < n; q++)
                    want += vkg_th_int_value(q, i);
                wrong += buf[i] != want;
            }
        }
        if (s->pool)
            vkg_comm_buffer_free(r->comm, buf);
        else
            free(buf);
    }
    vkg_th_report(r, "wrong=%d digest=%016llx path_bad=%d st=%s %s", wrong,
                  (unsigned long long)digest, path_bad, vkg_status_name(st),
                  st ? vkg_error_message() : "");
    return st != VKG_OK || wrong != 0 || path_bad != 0;
}

static void zero_run(int n, vkg_comm_shm shm, int pool, const vkg_th_opts *base,
                     const size_t *counts, int ncounts, char *digest_out, size_t cap)
{
    vkg_th_opts o = *base;
    o.shm = shm;
    sweep sw = {
        .counts = counts, .ncounts = ncounts, .expect_shm = shm != VKG_COMM_SHM_OFF, .pool = pool};
    vkg_th_result res[VKG_TH_MAX_RANKS];
    vkg_th_run(n, &o, zero_body, &sw, res);
    int ok = 1;
    for (int q = 0; q < n; q++)
        ok &= res[q].create_status == VKG_OK && res[q].body_rc == 0 &&
              strncmp(res[q].report, res[0].report, 31) == 0;
    if (!ok)
        vkg_th_dump(res, n);
    assert_true(ok);
    snprintf(digest_out, cap, "%.31s", res[0].report);
}

/* ZeRO-1's collectives in the segment, through the slots and on buffers in the pools: bitwise the
 * ZeroMQ engine's results, in rank order (the default thresholds) and in the ring's order
 * (ring_min_ranks 3, small_bytes 1 KiB), many pipeline steps (16 KiB chunks). */
static void test_zero_collectives_like_zmq(void **state)
{
    (void)state;
    static const size_t counts[] = {1, 5, 1000, 70001, 300007};
    for (int ring = 0; ring <= 1; ring++)
        for (int n = 2; n <= 4; n++) {
            vkg_th_opts o = {.transport = VKG_COMM_IPC,
                             .processes = 1,
                             .shm_chunk_bytes = 16384,
                             .ring_min_ranks = ring ? 3 : 0,
                             .small_bytes = ring ? 1024 : 0,
                             .wall_s = 120};
            char a[64], b[64], p[64];
            zero_run(n, VKG_COMM_SHM_REQUIRE, 0, &o, counts, 5, a, sizeof a);
            zero_run(n, VKG_COMM_SHM_REQUIRE, 1, &o, counts, 5, p, sizeof p);
            zero_run(n, VKG_COMM_SHM_OFF, 0, &o, counts, 5, b, sizeof b);
            fprintf(stderr, "  zero %s, %d ranks: shm %s | pool %s | zmq %s\n",
                    ring ? "ring" : "rank", n, a, p, b);
            assert_string_equal(a, b);
            assert_string_equal(p, b);
        }
}

/* The bf16 reduce-scatter in the segment (arg: pool, ring_min, small_bytes): for each count, over
 * uneven chunks (one empty), bitwise the reference and the bf16 allreduce's chunk
 * (vkg_th_sc_case); in the pools above 64 KiB when the buffer is in one. */
static int zero16_body(vkg_th_rank *r, void *arg)
{
    const int *a = arg;
    static const size_t counts[] = {1, 5, 1000, 70001, 300007};
    int n = r->size, bad = 0, ring_min = a[1] ? a[1] : 9;
    uint64_t dig = 0;
    if (!vkg_comm_uses_shm(r->comm)) {
        vkg_th_report(r, "FAIL path %s, expected shm", vkg_comm_path(r->comm));
        return 1;
    }
    for (int ci = 0; ci < 5; ci++) {
        size_t count = counts[ci], b[VKG_TH_MAX_RANKS + 1];
        zero_bounds(count, n, b);
        uint16_t *buf = NULL;
        if (a[0] ? vkg_comm_buffer_alloc(r->comm, count * 2 + 2, (void **)&buf) != VKG_OK
                 : !(buf = malloc(count * 2 + 2)))
            return 1;
        size_t small = a[2] ? (size_t)a[2] : n == 2 ? 2u << 20 : 512u << 10;
        int ring = count * 2 > small && (n == 2 || n >= ring_min);
        uint64_t e0[4], e1[4];
        vkg__comm_shm_engines(r->comm, e0);
        bad += vkg_th_sc_case(r, 7 + ci, count, b, ring, buf, &dig);
        vkg__comm_shm_engines(r->comm, e1);
        if (e1[3] - e0[3] != (uint64_t)(a[0] && count * 2 > (64u << 10))) {
            vkg_th_report(r, "FAIL count %zu: %llu calls in the pools", count,
                          (unsigned long long)(e1[3] - e0[3]));
            bad++;
        }
        if (a[0])
            vkg_comm_buffer_free(r->comm, buf);
        else
            free(buf);
    }
    vkg_th_report(r, "digest=%016llx", (unsigned long long)dig);
    return bad;
}

/* ZeRO's bf16 reduce-scatter in the segment, through the slots and in the pools, on 2 to 4
 * ranks, in rank order and in the ring's (ring_min_ranks 3, small_bytes 1 KiB). */
static void test_zero_bf16_like_allreduce(void **state)
{
    (void)state;
    for (int ring = 0; ring <= 1; ring++)
        for (int n = 2; n <= 4; n++)
            for (int pool = 0; pool <= 1; pool++) {
                int arg[3] = {pool, ring ? 3 : 0, ring ? 1024 : 0};
                vkg_th_opts o = {.transport = VKG_COMM_IPC,
                                 .processes = 1,
                                 .shm = VKG_COMM_SHM_REQUIRE,
                                 .shm_chunk_bytes = 16384,
                                 .ring_min_ranks = arg[1],
                                 .small_bytes = (size_t)arg[2],
                                 .wall_s = 120};
                vkg_th_result res[VKG_TH_MAX_RANKS];
                vkg_th_run(n, &o, zero16_body, arg, res);
                assert_true(vkg_th_agree(res, n, 23));
            }
}

/* 64 MiB of f32 and 32 MiB of bf16 on 2 and 4 ranks. */
static void test_large(void **state)
{
    (void)state;
    static const size_t counts[] = {16u << 20};
    const sweep f = {.counts = counts, .ncounts = 1, .dtypes = 1 << VKG_COMM_F32, .odd = 0};
    const sweep h = {.counts = counts, .ncounts = 1, .dtypes = 1 << VKG_COMM_BF16, .odd = 0};
    vkg_th_opts o = {.transport = VKG_COMM_IPC, .processes = 1, .wall_s = 200};
    char d[64];
    run_sweep(2, VKG_COMM_SHM_AUTO, &o, &f, d, sizeof d);
    run_sweep(4, VKG_COMM_SHM_AUTO, &o, &h, d, sizeof d);
}

/* ---- broadcast and allgather ---- */

static int bcast_body(vkg_th_rank *r, void *arg)
{
    (void)arg;
    const size_t sizes[] = {1, 4096, 300001};
    int bad = 0;
    vkg_status st = VKG_OK;
    for (size_t k = 0; k < 3 && st == VKG_OK; k++) {
        size_t b = sizes[k];
        uint8_t *buf = malloc(b), *all = malloc(b * (size_t)r->size), *mine = malloc(b);
        for (int root = 0; root < r->size && st == VKG_OK; root++) {
            for (size_t i = 0; i < b; i++)
                buf[i] = (uint8_t)(r->rank == root ? vkg_th_mix((uint32_t)(i + 7 * root)) : 0xee);
            st = vkg_comm_broadcast(r->comm, buf, b, root);
            for (size_t i = 0; i < b && st == VKG_OK; i++)
                bad += buf[i] != (uint8_t)vkg_th_mix((uint32_t)(i + 7 * root));
        }
        for (size_t i = 0; i < b; i++)
            mine[i] = (uint8_t)vkg_th_mix((uint32_t)i * 3 + (uint32_t)r->rank);
        if (st == VKG_OK)
            st = vkg_comm_allgather(r->comm, mine, b, all);
        for (int q = 0; q < r->size && st == VKG_OK; q++)
            for (size_t i = 0; i < b; i++)
                bad += all[(size_t)q * b + i] != (uint8_t)vkg_th_mix((uint32_t)i * 3 + (uint32_t)q);
        free(buf);
        free(all);
        free(mine);
    }
    vkg_th_report(r, "%s %d wrong %s", vkg_status_name(st), bad, vkg_comm_path(r->comm));
    return st != VKG_OK || bad || !vkg_comm_uses_shm(r->comm);
}

static void test_broadcast_allgather(void **state)
{
    (void)state;
    for (int n = 2; n <= 4; n++) {
        vkg_th_opts o = {.transport = VKG_COMM_IPC,
                         .processes = 1,
                         .shm = VKG_COMM_SHM_REQUIRE,
                         .shm_chunk_bytes = 65536,
                         .wall_s = 60};
        assert_true(vkg_th_run_ok(n, &o, bcast_body, NULL));
    }
}

/* ---- which path ---- */

typedef struct path_arg {
    const char *want;
} path_arg;

static int path_body(vkg_th_rank *r, void *arg)
{
    const path_arg *a = arg;
    vkg_th_report(r, "%s", vkg_comm_path(r->comm));
    return strncmp(vkg_comm_path(r->comm), a->want, strlen(a->want)) != 0;
}

static void expect_path(vkg_comm_transport t, vkg_comm_shm shm, const char *want)
{
    vkg_th_opts o = {.transport = t, .shm = shm, .wall_s = 30};
    path_arg a = {want};
    assert_true(vkg_th_run_ok(2, &o, path_body, &a));
}

static void test_policy_picks_the_path(void **state)
{
    (void)state;
    expect_path(VKG_COMM_IPC, VKG_COMM_SHM_AUTO, "shm (2 ranks on this host, single-copy ");
    expect_path(VKG_COMM_TCP, VKG_COMM_SHM_AUTO, "shm (2 ranks on this host, single-copy ");
    expect_path(VKG_COMM_TCP, VKG_COMM_SHM_OFF, "zmq tcp (shared memory off)");
    expect_path(VKG_COMM_INPROC, VKG_COMM_SHM_AUTO, "zmq inproc");
    expect_path(VKG_COMM_INPROC, VKG_COMM_SHM_REQUIRE, "shm (2 ranks on this host, single-copy ");
    vkg_comm_transport t = VKG_COMM_IPC;
    vkg_comm_shm s = VKG_COMM_SHM_AUTO;
    assert_int_equal(vkg_comm_transport_select("shm", &t, &s), VKG_OK);
    assert_true(t == VKG_COMM_IPC && s == VKG_COMM_SHM_REQUIRE);
    assert_int_equal(vkg_comm_transport_select("zmq", &t, &s), VKG_OK);
    assert_true(t == VKG_COMM_IPC && s == VKG_COMM_SHM_OFF);
    assert_int_equal(vkg_comm_transport_select("tcp", &t, &s), VKG_OK);
    assert_true(t == VKG_COMM_TCP && s == VKG_COMM_SHM_AUTO);
    assert_int_equal(vkg_comm_transport_select("memory", &t, &s), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "shm"));
}

/* ---- the handover refuses strangers ---- */

/* A forked process knocks at the job's socket with the given credentials (claiming rank 1);
 * returns 0 when it got the segment's descriptor, 1 when refused, 2 on a wrong outcome. Its
 * error message goes to msg. */
static int knock(const char *name, const vkg_shm_creds *cr, char *msg, size_t cap)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        int fd = -1;
        size_t bytes = 0;
        vkg_status st = vkg__shm_attach(name, cr, 1, vkg__now_ns() + 3000000000LL, &fd, &bytes);
        ssize_t w = write(fds[1], vkg_error_message(), strlen(vkg_error_message()) + 1);
        (void)w;
        _exit(st == VKG_OK && fd >= 0 ? 0 : st == VKG_ERR_PEER || st == VKG_ERR_TIMEOUT ? 1 : 2);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], msg, cap - 1);
    msg[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 3;
}

static void test_other_job_cannot_attach(void **state)
{
    (void)state;
    vkg_shm_creds job = {.job_id = 0x1234abcd5678ef01ull, .generation = 0};
    for (int i = 0; i < 16; i++)
        job.secret[i] = (uint8_t)(i * 37 + 5);
    uint8_t tag[VKG_SHM_TAG_BYTES];
    for (int i = 0; i < VKG_SHM_TAG_BYTES; i++)
        tag[i] = (uint8_t)(i * 11 + 3);
    char name[96], msg[512];
    vkg__shm_socket_name(tag, name, sizeof name);
    int seg = -1, lfd = -1;
    size_t bytes = 0;
    assert_int_equal(vkg__shm_create_fd(&job, 2, 4096, 0, &seg, &bytes), VKG_OK);
    assert_int_equal(vkg__shm_listen(name, &lfd), VKG_OK);
    pid_t host = fork();
    if (host == 0) { /* the host's first rank: serves until rank 1 attached */
        int refusals = 0;
        vkg_status st =
            vkg__shm_serve(lfd, &job, 2, seg, bytes, vkg__now_ns() + 20000000000LL, &refusals);
        _exit(st == VKG_OK ? (refusals > 63 ? 63 : refusals) : 100);
    }
    /* another job id, at this job's socket */
    vkg_shm_creds other = job;
    other.job_id ^= 1;
    assert_int_equal(knock(name, &other, msg, sizeof msg), 1);
    fprintf(stderr, "  another job: %s\n", msg);
    assert_non_null(strstr(msg, "is not this job"));
    /* this job's id but not its secret */
    vkg_shm_creds guess = job;
    guess.secret[3] ^= 0x40;
    assert_int_equal(knock(name, &guess, msg, sizeof msg), 1);
    fprintf(stderr, "  no secret: %s\n", msg);
    assert_non_null(strstr(msg, "does not hold this job's secret"));
    /* the rank itself attaches, and sees the segment */
    assert_int_equal(knock(name, &job, msg, sizeof msg), 0);
    int status = 0;
    waitpid(host, &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 2); /* two refusals, then rank 1 attached */
    close(lfd);
    close(seg);
}

/* ---- faults ---- */

#define FAULT_TIMEOUT_MS 1500
#define FAULT_COUNT (4u << 20) /* 16 MiB: many pipeline steps per allreduce */

/* The first allreduce ran in the segment on engine *arg (vkg__comm_shm_engines' index). */
static int took_engine(vkg_th_rank *r, void *arg)
{
    uint64_t e[4];
    vkg__comm_shm_engines(r->comm, e);
    return vkg_comm_uses_shm(r->comm) && e[*(const int *)arg] == 1;
}

static int loop_until_error(vkg_th_rank *r, void *arg)
{
    return vkg_th_allreduce_until_error(r, FAULT_COUNT, took_engine, arg);
}

/* cma: the allreduces run single-copy (process_vm_readv); 0: through the segment's slots. */
static void fault_case(int n, int victim, int sig, int cma)
{
    int engine = cma ? 1 : 0;
    vkg_th_opts o = {.transport = VKG_COMM_IPC,
                     .processes = 1,
                     .timeout_ms = FAULT_TIMEOUT_MS,
                     .shm = VKG_COMM_SHM_REQUIRE,
                     .wall_s = 30};
    char label[48];
    snprintf(label, sizeof label, "shm %s, %d ranks", cma ? "single-copy" : "slots", n);
    setenv("VKG_COMM_CMA", cma ? "1" : "0", 1);
    int ok = vkg_th_fault(n, &o, loop_until_error, &engine, victim, sig,
                          2.0 * FAULT_TIMEOUT_MS / 1000.0, label);
    unsetenv("VKG_COMM_CMA");
    assert_true(ok);
}

static void test_sigkill(void **state)
{
    (void)state;
    fault_case(2, 1, SIGKILL, 1);
    fault_case(3, 0, SIGKILL, 1);
    fault_case(2, 1, SIGKILL, 0);
}

static void test_sigstop(void **state)
{
    (void)state;
    fault_case(2, 0, SIGSTOP, 1);
    fault_case(3, 2, SIGSTOP, 0);
}

/* Rank 1 aborts while the others wait in a large allreduce: they learn it through the segment
 * (the message names the shm collective), with its reason, long before the timeout. */
static int abort_body(vkg_th_rank *r, void *arg)
{
    (void)arg;
    size_t count = 1u << 20;
    float *x = calloc(count, sizeof *x);
    vkg_status st = VKG_OK;
    double t = vkg_th_now();
    if (r->rank == 1) {
        usleep(300000);
        vkg_comm_abort(r->comm, "the loss went NaN");
        st = VKG_ERR_ABORTED;
    } else {
        st = vkg_comm_allreduce(r->comm, x, x, count, VKG_COMM_F32, VKG_COMM_SUM);
    }
    double dt = vkg_th_now() - t;
    vkg_th_report(r, "%s after %.2f s: %s", vkg_status_name(st), dt, vkg_error_message());
    free(x);
    if (r->rank == 1)
        return 0;
    return !(st == VKG_ERR_PEER && strstr(vkg_error_message(), "(shm): rank 1 aborted") &&
             strstr(vkg_error_message(), "the loss went NaN") && dt < 2.0);
}

static void test_abort_through_the_segment(void **state)
{
    (void)state;
    vkg_th_opts o = {.transport = VKG_COMM_IPC,
                     .processes = 1,
                     .timeout_ms = 10000,
                     .shm = VKG_COMM_SHM_REQUIRE,
                     .wall_s = 30};
    vkg_th_result res[3];
    vkg_th_run(3, &o, abort_body, NULL, res);
    int ok = res[0].body_rc == 0 && res[1].body_rc == 0 && res[2].body_rc == 0;
    if (!ok)
        vkg_th_dump(res, 3);
    assert_true(ok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_picks_the_path),
        cmocka_unit_test(test_other_job_cannot_attach),
        cmocka_unit_test(test_exact_and_like_zmq),
        cmocka_unit_test(test_pipeline_and_ring_order),
        cmocka_unit_test(test_large),
        cmocka_unit_test(test_broadcast_allgather),
        cmocka_unit_test(test_zero_collectives_like_zmq),
        cmocka_unit_test(test_zero_bf16_like_allreduce),
        cmocka_unit_test(test_abort_through_the_segment),
        cmocka_unit_test(test_sigkill),
        cmocka_unit_test(test_sigstop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
