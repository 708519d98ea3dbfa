/* The two-level allreduce across hosts (transport/hier.c), with hosts faked by the test-only host
 * tag (forked processes over ipc, each given its host's tag by the harness): 2 hosts x 2 ranks,
 * and hosts of unequal sizes: 3 + 1, 2 + 1 and 3 + 1 interleaved (ranks 0, 2, 3 on one host,
 * rank 1 on the other). Asserts: the path each layout picks (hierarchical for all of those, with
 * REQUIRE too; 4 on one host: one segment; every rank alone on its host: ZeroMQ only, REQUIRE
 * fails naming why); that the allreduce ran in the host's segment (its step counter moved);
 * exact results (integer-valued inputs, no element wrong) for sizes 1 .. 300007 (many pipeline
 * steps), f32, bf16 and f16, sum and average, in place and not; for inputs whose sum shows the
 * order of additions (f32), every element bitwise equal to the stated order P_a + P_b, the hosts'
 * partial sums each added in rank order (2 x 2: (x0 + x1) + (x2 + x3), where the flat path adds
 * ((x0 + x1) + x2) + x3, so the two differ in general: the test prints how many elements do;
 * interleaved 3 + 1: ((x0 + x2) + x3) + x1); every rank bitwise equal and two runs equal; and a
 * rank killed (SIGKILL) or frozen (SIGSTOP) named on every other rank within twice the timeout,
 * on 2 x 2 and on 3 + 1 (the lone rank of a host killed; a rank of the big host that has no lane
 * between the hosts frozen).
 * The reduce-scatter across hosts (f32 and bf16, uneven chunks, one empty) leaves each rank's
 * chunk bitwise as the two-level allreduce does, in the segment, and an allgatherv after it gives
 * the whole allreduce result (2 x 2 and 3 + 1 interleaved).
 * Broadcast and allgather across hosts: test_comm_hier_copy.c. */
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

static const size_t counts[] = {1, 3, 1000, 70001, 300007};
#define NCOUNTS 5

typedef struct expect {
    const char *path;  /* the start of vkg_comm_path */
    const char *hosts; /* with two levels: each rank's host (two hosts, 'a' and 'b'); NULL: flat */
} expect;

/* Element i of the order-revealing inputs summed as the path adds them: with two levels, each
 * host's ranks in rank order, then the two host sums (whose order cannot show); flat: rank order.
 */
static float stated_sum(const expect *x, int n, size_t i)
{
    float part[2] = {0, 0}, flat = 0;
    int seen[2] = {0, 0};
    for (int q = 0; q < n; q++) {
        float v = vkg_th_odd_value(q, i, 16);
        int h = x->hosts ? x->hosts[q] - 'a' : 0;
        part[h] = seen[h]++ ? part[h] + v : v;
        flat = q ? flat + v : v;
    }
    return x->hosts ? part[0] + part[1] : flat;
}

static float flat_sum(int n, size_t i)
{
    float s = vkg_th_odd_value(0, i, 16);
    for (int q = 1; q < n; q++)
        s += vkg_th_odd_value(q, i, 16);
    return s;
}

/* Every case; reports "wrong=<n> digest=<hex>" then details. */
static int sweep_body(vkg_th_rank *r, void *arg)
{
    const expect *x = arg;
    int n = r->size, wrong = 0, like_flat = 0, odd_total = 0, off_segment = 0;
    uint64_t digest = 0;
    vkg_status st = VKG_OK;
    if (strncmp(vkg_comm_path(r->comm), x->path, strlen(x->path)) != 0) {
        vkg_th_report(r, "path \"%s\", expected \"%s...\"", vkg_comm_path(r->comm), x->path);
        return 1;
    }
    for (int ci = 0; ci < NCOUNTS && st == VKG_OK; ci++) {
        size_t count = counts[ci];
        for (int dt = 0; dt < 3 && st == VKG_OK; dt++) {
            size_t es = vkg_comm_dtype_size((vkg_comm_dtype)dt);
            uint8_t *buf = malloc(count * es + 8), *out = malloc(count * es + 8);
            for (int op = 0; op < 2 && st == VKG_OK; op++) {
                for (int odd = 0; odd <= 1 && st == VKG_OK; odd++) {
                    uint8_t *in = op ? buf + es : buf, *dst = op ? out + es : buf;
                    for (size_t i = 0; i < count; i++) {
                        float v =
                            odd ? vkg_th_odd_value(r->rank, i, 16) : vkg_th_int_value(r->rank, i);
                        if (dt == VKG_COMM_F32)
                            ((float *)in)[i] = v;
                        else if (odd)
                            ((uint16_t *)in)[i] =
                                (uint16_t)(vkg_th_mix((uint32_t)i + 7u * r->rank) &
                                           0x3bff); /* finite, mixed scales */
                        else
                            ((uint16_t *)in)[i] = vkg_th_to16(v, (vkg_comm_dtype)dt);
                    }
                    uint32_t steps = vkg__comm_shm_steps(r->comm);
                    st = vkg_comm_allreduce(r->comm, in, dst, count, (vkg_comm_dtype)dt,
                                            (vkg_comm_op)op);
                    if (st != VKG_OK)
                        break;
                    off_segment += vkg__comm_shm_steps(r->comm) == steps;
                    digest = digest * 1099511628211ull ^ vkg_th_digest(dst, count * es);
                    if (odd && dt != VKG_COMM_F32)
                        continue; /* bitwise equality across ranks: the digest */
                    for (size_t i = 0; i < count; i++) {
                        float want, got;
                        if (dt == VKG_COMM_F32)
                            got = ((float *)dst)[i];
                        else
                            got = vkg_th_from16(((uint16_t *)dst)[i], (vkg_comm_dtype)dt);
                        if (odd) { /* the stated order, bit for bit */
                            float flat = flat_sum(n, i);
                            want = stated_sum(x, n, i);
                            if (op)
                                want /= (float)n, flat /= (float)n;
                            like_flat += memcmp(&got, &flat, 4) == 0;
                            odd_total++;
                            wrong += memcmp(&got, &want, 4) != 0;
                            continue;
                        }
                        float sum = 0;
                        for (int q = 0; q < n; q++)
                            sum += vkg_th_int_value(q, i);
                        want = op ? sum / (float)n : sum;
                        float tol = dt == VKG_COMM_F32 || !op
                                        ? 0.0f
                                        : (dt == VKG_COMM_BF16 ? 1.0f / 64 : 1.0f / 1024) * 8;
                        wrong += got - want > tol || got - want < -tol;
                    }
                }
            }
            free(buf);
            free(out);
        }
    }
    wrong += off_segment; /* every call must have run in the segment */
    vkg_th_report(r,
                  "wrong=%d digest=%016llx st=%s %s; %d calls outside the segment; "
                  "order-revealing f32: %d of %d like flat",
                  wrong, (unsigned long long)digest, vkg_status_name(st),
                  st ? vkg_error_message() : "", off_segment, like_flat, odd_total);
    return st != VKG_OK || wrong != 0;
}

static vkg_th_opts hosts_opts(int ranks_per_host)
{
    vkg_th_opts o = {.transport = VKG_COMM_IPC,
                     .processes = 1,
                     .timeout_ms = 20000,
                     .shm_chunk_bytes = 64u << 10, /* many steps per allreduce */
                     .segment_bytes = 64u << 10,   /* many ring segments between hosts */
                     .ranks_per_host = ranks_per_host,
                     .wall_s = 120};
    return o;
}

/* Run the sweep; every rank must succeed with one digest, returned in digest_out. */
static void run_sweep(int n, const vkg_th_opts *o, const expect *x, char *digest_out, size_t cap)
{
    vkg_th_result res[VKG_TH_MAX_RANKS];
    vkg_th_run(n, o, sweep_body, (void *)x, res);
    assert_true(vkg_th_agree(res, n, 31)); /* wrong=0 digest=<16 hex> */
    fprintf(stderr, "  %s (%s): %s\n", x->path, x->hosts ? x->hosts : "one host", res[0].report);
    snprintf(digest_out, cap, "%.31s", res[0].report);
}

/* 2 hosts x 2 ranks: the two levels, exact, the stated order, the same bits twice. */
static void test_two_hosts_exact(void **state)
{
    (void)state;
    vkg_th_opts o = hosts_opts(2);
    const expect x = {.path = "hier (2 hosts x 2 ranks", .hosts = "aabb"};
    char a[64], b[64];
    run_sweep(4, &o, &x, a, sizeof a);
    run_sweep(4, &o, &x, b, sizeof b);
    assert_string_equal(a, b);
}

/* Hosts of unequal sizes (one lane between them), also interleaved: the two levels, exact, the
 * stated order, the same bits twice. */
static void test_unequal_hosts_exact(void **state)
{
    (void)state;
    const char *layouts[] = {"aaab", "aab", "abaa"};
    for (int k = 0; k < 3; k++) {
        vkg_th_opts o = hosts_opts(0);
        o.hosts = layouts[k];
        const expect x = {.path = "hier (2 hosts of 1 to ", .hosts = layouts[k]};
        int n = (int)strlen(layouts[k]);
        char a[64], b[64];
        run_sweep(n, &o, &x, a, sizeof a);
        run_sweep(n, &o, &x, b, sizeof b);
        assert_string_equal(a, b);
    }
}

/* The same 4 ranks on one host use one segment and add in rank order (the flat order). */
static void test_one_host_is_flat(void **state)
{
    (void)state;
    vkg_th_opts o = hosts_opts(0);
    const expect x = {.path = "shm (4 ranks", .hosts = NULL};
    char a[64];
    run_sweep(4, &o, &x, a, sizeof a);
}

static int path_body(vkg_th_rank *r, void *arg)
{
    (void)arg;
    vkg_th_report(r, "%d %s", vkg_comm_uses_shm(r->comm), vkg_comm_path(r->comm));
    return 0;
}

/* Hosts of 2 and 1 ranks take two levels, with REQUIRE too; ranks each alone on their host keep
 * ZeroMQ, and REQUIRE then fails naming why. */
static void test_layout_paths(void **state)
{
    (void)state;
    vkg_th_opts o = hosts_opts(2);
    vkg_th_result res[3];
    const char *want[3] = {"1 hier (2 hosts of 1 to 2 ranks, 2 here: shm in the host, zmq ipc",
                           "1 hier (2 hosts of 1 to 2 ranks, 2 here: shm in the host, zmq ipc",
                           "1 hier (2 hosts of 1 to 2 ranks, 1 here: shm in the host, zmq ipc"};
    for (int require = 0; require <= 1; require++) {
        o.shm = require ? VKG_COMM_SHM_REQUIRE : VKG_COMM_SHM_AUTO;
        vkg_th_run(3, &o, path_body, NULL, res);
        for (int q = 0; q < 3; q++) {
            if (strncmp(res[q].report, want[q], strlen(want[q])) != 0)
                vkg_th_dump(res, 3);
            assert_int_equal(res[q].create_status, VKG_OK);
            assert_memory_equal(res[q].report, want[q], strlen(want[q]));
        }
    }
    o = hosts_opts(1);
    vkg_th_run(3, &o, path_body, NULL, res);
    for (int q = 0; q < 3; q++) {
        assert_int_equal(res[q].create_status, VKG_OK);
        assert_string_equal(res[q].report, "0 zmq ipc (ranks on several hosts)");
    }
    o.shm = VKG_COMM_SHM_REQUIRE;
    vkg_th_run(3, &o, path_body, NULL, res);
    for (int q = 0; q < 3; q++)
        assert_int_not_equal(res[q].create_status, VKG_OK);
    if (!strstr(res[0].report, "every rank is alone on its host"))
        vkg_th_dump(res, 3);
    assert_non_null(strstr(res[0].report, "every rank is alone on its host"));
}

/* ---- reduce-scatter across hosts (ZeRO-1's gradient sum) ---- */

/* Uneven chunks, the second one empty: chunk q grows with q. */
static void uneven_bounds(size_t count, int n, size_t *b)
{
    size_t den = (size_t)n * (size_t)(n + 1) / 2 - 2; /* weights 1, 0, 3, 4, ..., n (n >= 2) */
    b[0] = 0;
    for (int q = 0, w = 0; q < n; q++) {
        w += q == 1 ? 0 : q + 1;
        b[q + 1] = q + 1 == n ? count : count * (size_t)w / den;
    }
}

/* For f32 and bf16 and each count, on order-revealing inputs: this rank's chunk after
 * vkg_comm_reduce_scatter_dtype is bitwise the allreduce's there, in the segment (its step
 * counter moved); then (f32) the allgatherv gives the whole allreduce result bitwise. Reports
 * "wrong=<n>". */
static int scatter_body(vkg_th_rank *r, void *arg)
{
    (void)arg;
    int n = r->size, wrong = 0;
    size_t b[VKG_TH_MAX_RANKS + 1];
    vkg_status st = VKG_OK;
    for (int ci = 0; ci < NCOUNTS - 1 && st == VKG_OK; ci++) {
        size_t count = counts[ci];
        uneven_bounds(count, n, b);
        for (int dt = 0; dt < 2 && st == VKG_OK; dt++) { /* VKG_COMM_F32, VKG_COMM_BF16 */
            size_t es = vkg_comm_dtype_size((vkg_comm_dtype)dt);
            uint8_t *all = malloc(count * es), *rs = malloc(count * es);
            for (size_t i = 0; i < count; i++) {
                if (dt == VKG_COMM_F32)
                    ((float *)all)[i] = vkg_th_odd_value(r->rank, i, 16);
                else
                    ((uint16_t *)all)[i] = vkg_th_sc_input(ci, r->rank, i);
            }
            memcpy(rs, all, count * es);
            st = vkg_comm_allreduce(r->comm, all, all, count, (vkg_comm_dtype)dt, VKG_COMM_SUM);
            uint32_t steps = vkg__comm_shm_steps(r->comm);
            if (st == VKG_OK)
                st = vkg_comm_reduce_scatter_dtype(r->comm, rs, count, b, (vkg_comm_dtype)dt);
            wrong += st == VKG_OK && count > 1 && vkg__comm_shm_steps(r->comm) == steps;
            size_t lo = b[r->rank] * es, len = (b[r->rank + 1] - b[r->rank]) * es;
            wrong += st == VKG_OK && memcmp(rs + lo, all + lo, len) != 0;
            if (st == VKG_OK && dt == VKG_COMM_F32) {
                st = vkg_comm_allgatherv(r->comm, (float *)rs, count, b);
                wrong += st == VKG_OK && memcmp(rs, all, count * es) != 0;
            }
            free(all), free(rs);
        }
    }
    vkg_th_report(r, "wrong=%d st=%s %s", wrong, vkg_status_name(st),
                  st ? vkg_error_message() : "");
    return st != VKG_OK || wrong != 0;
}

/* The reduce-scatter across hosts has the two-level allreduce's bits (2 x 2 and 3 + 1
 * interleaved, where they differ from the one-host order), so ZeRO-1 across hosts sums its
 * gradients as data parallelism does. */
static void test_reduce_scatter_two_levels(void **state)
{
    (void)state;
    const char *layouts[] = {"aabb", "abaa"};
    for (int k = 0; k < 2; k++) {
        vkg_th_opts o = hosts_opts(0);
        o.hosts = layouts[k];
        int n = (int)strlen(layouts[k]);
        vkg_th_result res[VKG_TH_MAX_RANKS];
        vkg_th_run(n, &o, scatter_body, NULL, res);
        if (!vkg_th_agree(res, n, 8))
            vkg_th_dump(res, n);
        assert_true(vkg_th_agree(res, n, 8));
        assert_memory_equal(res[0].report, "wrong=0 ", 8);
        fprintf(stderr, "  reduce-scatter across hosts %s: %s\n", layouts[k], res[0].report);
    }
}

/* ---- faults ---- */

#define FAULT_TIMEOUT_MS 1500
#define FAULT_COUNT (4u << 20)

static int took_hier(vkg_th_rank *r, void *arg)
{
    (void)arg;
    return strncmp(vkg_comm_path(r->comm), "hier", 4) == 0;
}

static int loop_until_error(vkg_th_rank *r, void *arg)
{
    return vkg_th_allreduce_until_error(r, FAULT_COUNT, took_hier, arg);
}

/* hosts: one character per rank naming its host ("aabb": 2 x 2). */
static void fault_case(const char *hosts, int victim, int sig)
{
    vkg_th_opts o = hosts_opts(0);
    o.hosts = hosts;
    o.timeout_ms = FAULT_TIMEOUT_MS;
    o.shm_chunk_bytes = 0;
    o.segment_bytes = 0;
    o.wall_s = 30;
    char label[32];
    snprintf(label, sizeof label, "hosts %s", hosts);
    assert_true(vkg_th_fault((int)strlen(hosts), &o, loop_until_error, NULL, victim, sig,
                             2.0 * FAULT_TIMEOUT_MS / 1000.0, label));
}

static void test_sigkill(void **state)
{
    (void)state;
    fault_case("aabb", 3, SIGKILL);
    fault_case("aaab", 3, SIGKILL); /* the host of one rank */
}

static void test_sigstop(void **state)
{
    (void)state;
    fault_case("aabb", 1, SIGSTOP);
    fault_case("aaab", 2, SIGSTOP); /* a rank without a lane between the hosts */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_paths),
        cmocka_unit_test(test_two_hosts_exact),
        cmocka_unit_test(test_unequal_hosts_exact),
        cmocka_unit_test(test_one_host_is_flat),
        cmocka_unit_test(test_reduce_scatter_two_levels),
        cmocka_unit_test(test_sigkill),
        cmocka_unit_test(test_sigstop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
