/* The two-level allreduce across hosts (transport/hier.c): 2 "hosts" x 2 ranks, faked with the
 * test-only host tag (forked processes over ipc, each given "h0" or "h1" by the harness). Asserts:
 * the path each layout picks (2 x 2: hierarchical; 4 on one host: one segment; hosts of 2 and 1:
 * ZeroMQ only); exact results (integer-valued inputs, no element wrong) for sizes 1 .. 300007
 * (many pipeline steps), f32, bf16 and f16, sum and average, in place and not; for inputs whose
 * sum shows the order of additions (f32), every element bitwise equal to the stated order
 * (x0 + x1) + (x2 + x3) (the flat path adds ((x0 + x1) + x2) + x3, so the two differ in general:
 * the test prints how many elements do); every rank bitwise equal and two runs equal; and a rank
 * killed (SIGKILL) or frozen (SIGSTOP) named on every other rank within twice the timeout. */
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

#include "test_comm_harness.h"
#include "vkgpt/comm.h"

static const size_t counts[] = {1, 3, 1000, 70001, 300007};
#define NCOUNTS 5

typedef struct expect {
    const char *path; /* the start of vkg_comm_path */
    int hier;         /* check the two-level order on the order-revealing inputs */
} expect;

/* Every case; reports "wrong=<n> digest=<hex>" then details. */
static int sweep_body(vkg_th_rank *r, void *arg)
{
    const expect *x = arg;
    int n = r->size, wrong = 0, like_flat = 0, odd_total = 0;
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
                    st = vkg_comm_allreduce(r->comm, in, dst, count, (vkg_comm_dtype)dt,
                                            (vkg_comm_op)op);
                    if (st != VKG_OK)
                        break;
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
                            float p0 = vkg_th_odd_value(0, i, 16) + vkg_th_odd_value(1, i, 16);
                            float p1 = vkg_th_odd_value(2, i, 16) + vkg_th_odd_value(3, i, 16);
                            float flat =
                                ((vkg_th_odd_value(0, i, 16) + vkg_th_odd_value(1, i, 16)) +
                                 vkg_th_odd_value(2, i, 16)) +
                                vkg_th_odd_value(3, i, 16);
                            want = x->hier ? p0 + p1 : flat;
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
    vkg_th_report(r, "wrong=%d digest=%016llx st=%s %s; order-revealing f32: %d of %d like flat",
                  wrong, (unsigned long long)digest, vkg_status_name(st),
                  st ? vkg_error_message() : "", like_flat, odd_total);
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
    int ok = 1;
    for (int q = 0; q < n; q++) {
        ok &= res[q].create_status == VKG_OK && res[q].body_rc == 0;
        ok &= strncmp(res[q].report, res[0].report, 31) == 0; /* wrong=0 digest=<16 hex> */
    }
    if (!ok || getenv("VKG_TEST_VERBOSE"))
        vkg_th_dump(res, n);
    assert_true(ok);
    fprintf(stderr, "  %s: %s\n", x->path, res[0].report);
    snprintf(digest_out, cap, "%.31s", res[0].report);
}

/* 2 hosts x 2 ranks: the two levels, exact, the stated order, the same bits twice. */
static void test_two_hosts_exact(void **state)
{
    (void)state;
    vkg_th_opts o = hosts_opts(2);
    const expect x = {.path = "hier (2 hosts x 2 ranks", .hier = 1};
    char a[64], b[64];
    run_sweep(4, &o, &x, a, sizeof a);
    run_sweep(4, &o, &x, b, sizeof b);
    assert_string_equal(a, b);
}

/* The same 4 ranks on one host use one segment and add in rank order (the flat order). */
static void test_one_host_is_flat(void **state)
{
    (void)state;
    vkg_th_opts o = hosts_opts(0);
    const expect x = {.path = "shm (4 ranks", .hier = 0};
    char a[64];
    run_sweep(4, &o, &x, a, sizeof a);
}

static int path_body(vkg_th_rank *r, void *arg)
{
    (void)arg;
    vkg_th_report(r, "%d %s", vkg_comm_uses_shm(r->comm), vkg_comm_path(r->comm));
    return 0;
}

/* Hosts of unequal size (2 and 1) keep ZeroMQ; REQUIRE then fails naming why. */
static void test_uneven_hosts(void **state)
{
    (void)state;
    vkg_th_opts o = hosts_opts(2);
    vkg_th_result res[3];
    vkg_th_run(3, &o, path_body, NULL, res);
    for (int q = 0; q < 3; q++) {
        if (strncmp(res[q].report, "0 zmq ipc (ranks on several hosts)", 34) != 0)
            vkg_th_dump(res, 3);
        assert_int_equal(res[q].create_status, VKG_OK);
        assert_string_equal(res[q].report, "0 zmq ipc (ranks on several hosts)");
    }
    o.shm = VKG_COMM_SHM_REQUIRE;
    vkg_th_run(3, &o, path_body, NULL, res);
    for (int q = 0; q < 3; q++)
        assert_int_not_equal(res[q].create_status, VKG_OK);
    assert_non_null(strstr(res[0].report, "every host holds the same number"));
}

/* ---- faults ---- */

#define FAULT_TIMEOUT_MS 1500
#define FAULT_COUNT (4u << 20)

static int loop_until_error(vkg_th_rank *r, void *arg)
{
    (void)arg;
    float *x = malloc(FAULT_COUNT * sizeof *x);
    for (size_t i = 0; i < FAULT_COUNT; i++)
        x[i] = (float)(i % 7);
    vkg_status st = vkg_comm_allreduce(r->comm, x, x, FAULT_COUNT, VKG_COMM_F32, VKG_COMM_AVG);
    if (strncmp(vkg_comm_path(r->comm), "hier", 4) != 0)
        st = VKG_ERR_STATE;
    vkg_th_ready(r);
    for (long it = 0; st == VKG_OK && it < 1000000; it++)
        st = vkg_comm_allreduce(r->comm, x, x, FAULT_COUNT, VKG_COMM_F32, VKG_COMM_AVG);
    vkg_th_report(r, "%s: %s", vkg_status_name(st), vkg_error_message());
    free(x);
    return st == VKG_OK ? 0 : 1;
}

static void fault_case(int victim, int sig)
{
    vkg_th_opts o = hosts_opts(2);
    o.timeout_ms = FAULT_TIMEOUT_MS;
    o.shm_chunk_bytes = 0;
    o.segment_bytes = 0;
    o.wall_s = 30;
    vkg_th_job *j = vkg_th_start(4, &o, loop_until_error, NULL);
    assert_int_equal(vkg_th_wait_ready(j, 20), 0);
    usleep(100000);
    double t0 = vkg_th_now();
    kill(vkg_th_pid(j, victim), sig);
    vkg_th_result res[4];
    vkg_th_finish(j, res, 1u << victim);
    char name[32];
    snprintf(name, sizeof name, "rank %d", victim);
    int ok = 1;
    double worst = 0;
    for (int q = 0; q < 4; q++) {
        if (q == victim)
            continue;
        double dt = res[q].t_done - t0;
        worst = dt > worst ? dt : worst;
        ok &= res[q].reported && res[q].body_rc == 1 && strstr(res[q].report, name) != NULL &&
              dt <= 2.0 * FAULT_TIMEOUT_MS / 1000.0;
    }
    fprintf(stderr,
            "  2 hosts x 2, %s rank %d: slowest survivor failed after %.2f s (bound %.1f)\n",
            sig == SIGKILL ? "SIGKILL" : "SIGSTOP", victim, worst, 2.0 * FAULT_TIMEOUT_MS / 1000.0);
    if (!ok || getenv("VKG_TEST_VERBOSE"))
        vkg_th_dump(res, 4);
    assert_true(ok);
}

static void test_sigkill(void **state)
{
    (void)state;
    fault_case(3, SIGKILL);
}

static void test_sigstop(void **state)
{
    (void)state;
    fault_case(1, SIGSTOP);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uneven_hosts),     cmocka_unit_test(test_two_hosts_exact),
        cmocka_unit_test(test_one_host_is_flat), cmocka_unit_test(test_sigkill),
        cmocka_unit_test(test_sigstop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
