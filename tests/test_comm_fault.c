/* Faults: a rank killed (SIGKILL) or frozen (SIGSTOP) in the middle of allreduces over tcp and
 * ipc makes every surviving rank fail within twice the timeout with an error naming it; a rank
 * that calls vkg_comm_abort stops the others at once with its reason; over inproc (no liveness
 * signal) a rank that never shows up is reported by the deadline, and ranks that wait for a rank
 * that waits for it name the end of that chain. And what is not a fault: steps longer than the
 * timeout, a peer busy computing while the others wait (its heartbeats answer), a freeze shorter
 * than the timeout; ranks waiting for each other in a cycle still fail. Every child process is
 * bounded and reaped by the harness. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_comm_harness.h"
#include "vkgpt/comm.h"

#define TIMEOUT_MS 1500
#define COUNT (1024 * 1024) /* 4 MiB of floats: several zero-copy segments in flight */

/* Allreduce until something fails; report the status and message. */
static int loop_until_error(vkg_th_rank *r, void *arg)
{
    (void)arg;
    float *x = malloc(COUNT * sizeof *x);
    for (int i = 0; i < COUNT; i++)
        x[i] = (float)(i % 7);
    vkg_status st = vkg_comm_allreduce(r->comm, x, x, COUNT, VKG_COMM_F32, VKG_COMM_AVG);
    vkg_th_ready(r);
    for (long it = 0; st == VKG_OK && it < 1000000; it++)
        st = vkg_comm_allreduce(r->comm, x, x, COUNT, VKG_COMM_F32, VKG_COMM_AVG);
    vkg_th_report(r, "%s: %s", vkg_status_name(st), vkg_error_message());
    free(x);
    return st == VKG_OK ? 0 : 1;
}

static void fault_case(vkg_comm_transport t, int n, int victim, int sig)
{
    vkg_th_opts o = {.transport = t,
                     .processes = 1,
                     .timeout_ms = TIMEOUT_MS,
                     .segment_bytes = 256 * 1024,
                     .small_bytes = 16 * 1024,
                     .wall_s = 30};
    char label[32];
    snprintf(label, sizeof label, "%s, %d ranks", vkg_comm_transport_name(t), n);
    assert_true(
        vkg_th_fault(n, &o, loop_until_error, NULL, victim, sig, 2.0 * TIMEOUT_MS / 1000.0, label));
}

static void test_sigkill_tcp(void **state)
{
    (void)state;
    fault_case(VKG_COMM_TCP, 3, 1, SIGKILL);
}

static void test_sigkill_ipc_master(void **state)
{
    (void)state;
    fault_case(VKG_COMM_IPC, 4, 0, SIGKILL);
}

static void test_sigstop_ipc(void **state)
{
    (void)state;
    fault_case(VKG_COMM_IPC, 3, 2, SIGSTOP);
}

static void test_sigstop_tcp_pair(void **state)
{
    (void)state;
    fault_case(VKG_COMM_TCP, 2, 1, SIGSTOP);
}

/* A chain: rank 0 waits for rank 1, which waits for rank 2, which is stuck. Whichever of ranks 0
 * and 1 reaches its deadline first (their timeouts differ on purpose), both must name rank 2, the
 * end of the chain, within twice the shorter timeout. */
typedef struct chain_arg {
    int timeout_ms[2]; /* ranks 0 and 1 */
} chain_arg;

static int chain_body(vkg_th_rank *r, void *arg)
{
    const chain_arg *a = arg;
    float x = 0;
    if (r->rank == 2) {
        usleep(3000000);
        vkg_status st = vkg_comm_recv(r->comm, 1, 7, &x, sizeof x);
        vkg_th_report(r, "%s: %s", vkg_status_name(st), vkg_error_message());
        return st != VKG_OK ? 0 : 1; /* the others gave up on it */
    }
    int t0 = a->timeout_ms[0] < a->timeout_ms[1] ? a->timeout_ms[0] : a->timeout_ms[1];
    assert_int_equal(vkg_comm_set_timeout(r->comm, a->timeout_ms[r->rank]), VKG_OK);
    double t = vkg_th_now();
    vkg_status st = vkg_comm_recv(r->comm, r->rank + 1, 7, &x, sizeof x);
    double dt = vkg_th_now() - t;
    vkg_th_report(r, "%s after %.2f s: %s", vkg_status_name(st), dt, vkg_error_message());
    return st != VKG_OK && strstr(vkg_error_message(), "rank 2 (") && dt >= t0 / 1000.0 &&
                   dt <= 2.0 * t0 / 1000.0
               ? 0
               : 1;
}

static void test_stall_chain_names_its_end(void **state)
{
    (void)state;
    const chain_arg cases[] = {{{1000, 5000}}, {{5000, 1000}}};
    for (int k = 0; k < 2; k++) {
        vkg_th_opts o = {.transport = VKG_COMM_INPROC, .timeout_ms = 5000, .wall_s = 30};
        vkg_th_result res[VKG_TH_MAX_RANKS];
        vkg_th_run(3, &o, chain_body, (void *)&cases[k], res);
        int ok = 1;
        for (int q = 0; q < 3; q++)
            ok &= res[q].create_status == VKG_OK && res[q].body_rc == 0;
        if (!ok || getenv("VKG_TEST_VERBOSE"))
            vkg_th_dump(res, 3);
        assert_true(ok);
    }
}

/* Rank 1 gives up after a few allreduces; the others must stop at once with its reason. */
static int abort_body(vkg_th_rank *r, void *arg)
{
    (void)arg;
    float x[4096] = {0};
    vkg_status st = VKG_OK;
    for (int it = 0; it < 5 && st == VKG_OK; it++)
        st = vkg_comm_allreduce(r->comm, x, x, 4096, VKG_COMM_F32, VKG_COMM_SUM);
    double t = vkg_th_now();
    if (r->rank == 1) {
        vkg_comm_abort(r->comm, "loss became NaN");
        st = vkg_comm_barrier(r->comm); /* a failed communicator stays failed */
        vkg_th_report(r, "%s", vkg_status_name(st));
        return st == VKG_ERR_ABORTED ? 0 : 1;
    }
    for (int it = 0; it < 1000 && st == VKG_OK; it++)
        st = vkg_comm_allreduce(r->comm, x, x, 4096, VKG_COMM_F32, VKG_COMM_SUM);
    vkg_th_report(r, "%s after %.2f s: %s", vkg_status_name(st), vkg_th_now() - t,
                  vkg_error_message());
    return st == VKG_ERR_PEER && strstr(vkg_error_message(), "rank 1 aborted") &&
                   strstr(vkg_error_message(), "loss became NaN") && vkg_th_now() - t < 1.0
               ? 0
               : 1;
}

static void test_abort_reaches_everyone(void **state)
{
    (void)state;
    const vkg_comm_transport ts[] = {VKG_COMM_INPROC, VKG_COMM_IPC};
    for (int k = 0; k < 2; k++) {
        vkg_th_opts o = {.transport = ts[k],
                         .processes = ts[k] != VKG_COMM_INPROC,
                         .timeout_ms = 5000,
                         .wall_s = 30};
        vkg_th_result res[VKG_TH_MAX_RANKS];
        vkg_th_run(3, &o, abort_body, NULL, res);
        int ok = 1;
        for (int q = 0; q < 3; q++)
            ok &= res[q].create_status == VKG_OK && res[q].body_rc == 0;
        if (!ok)
            vkg_th_dump(res, 3);
        assert_true(ok);
    }
}

/* Rank 1 sleeps instead of entering the barrier: rank 0's deadline names it. */
static int late_body(vkg_th_rank *r, void *arg)
{
    (void)arg;
    if (r->rank == 1) {
        usleep(2500000);
        vkg_status st = vkg_comm_barrier(r->comm);
        vkg_th_report(r, "%s: %s", vkg_status_name(st), vkg_error_message());
        return st == VKG_ERR_PEER ? 0 : 1; /* rank 0's abort is waiting for it */
    }
    double t = vkg_th_now();
    vkg_status st = vkg_comm_barrier(r->comm);
    double dt = vkg_th_now() - t;
    vkg_th_report(r, "%s after %.2f s: %s", vkg_status_name(st), dt, vkg_error_message());
    return st == VKG_ERR_TIMEOUT && strstr(vkg_error_message(), "rank 1") && dt >= 0.9 && dt <= 2.0
               ? 0
               : 1;
}

static void test_deadline_names_the_late_rank(void **state)
{
    (void)state;
    vkg_th_opts o = {.transport = VKG_COMM_INPROC, .timeout_ms = 1000, .wall_s = 30};
    vkg_th_result res[VKG_TH_MAX_RANKS];
    vkg_th_run(2, &o, late_body, NULL, res);
    int ok = res[0].body_rc == 0 && res[1].body_rc == 0;
    if (!ok)
        vkg_th_dump(res, 2);
    assert_true(ok);
}

/* ---- long steps: a deadline counts only time spent waiting for a peer that makes no progress ----
 */

typedef struct busy_arg {
    int iters;
    useconds_t work_us[2]; /* each rank's "compute" before every allreduce */
    int count;             /* floats per allreduce (0: 1000) */
    int bursts;            /* calls back to back after each work (0: 1) */
    int bcast;             /* 1: broadcasts from rank 0 instead of allreduces */
} busy_arg;

/* iters x bursts allreduces, each burst after the rank's own work; every result is checked. */
static int busy_body(vkg_th_rank *r, void *arg)
{
    const busy_arg *a = arg;
    int n = a->count ? a->count : 1000;
    float *x = malloc((size_t)n * sizeof *x);
    vkg_status st = x ? VKG_OK : VKG_ERR_NOMEM;
    int bad = 0;
    vkg_th_ready(r);
    for (int it = 0; it < a->iters && st == VKG_OK; it++) {
        usleep(a->work_us[r->rank > 0]);
        for (int k = 0; k < (a->bursts ? a->bursts : 1) && st == VKG_OK; k++) {
            for (int i = 0; i < n; i++)
                x[i] = (float)(i % 1000 + r->rank + it);
            if (a->bcast) {
                st = vkg_comm_broadcast(r->comm, x, (size_t)n * sizeof *x, 0);
                for (int i = 0; i < n && st == VKG_OK; i++)
                    bad += x[i] != (float)(i % 1000 + it);
                continue;
            }
            st = vkg_comm_allreduce(r->comm, x, x, (size_t)n, VKG_COMM_F32, VKG_COMM_SUM);
            for (int i = 0; i < n && st == VKG_OK; i++)
                bad += x[i] != (float)(2 * (i % 1000 + it) + 1);
        }
    }
    vkg_th_report(r, "%s: %s (%d wrong)", vkg_status_name(st), vkg_error_message(), bad);
    free(x);
    return st != VKG_OK || bad;
}

static void busy_case_shm(vkg_comm_transport t, const busy_arg *a, vkg_comm_shm shm)
{
    vkg_th_opts o = {.transport = t, .processes = 1, .shm = shm, .timeout_ms = 1000, .wall_s = 60};
    vkg_th_result res[2];
    vkg_th_run(2, &o, busy_body, (void *)a, res);
    int ok = res[0].body_rc == 0 && res[1].body_rc == 0;
    if (!ok)
        vkg_th_dump(res, 2);
    assert_true(ok);
}

static void busy_case(vkg_comm_transport t, const busy_arg *a)
{
    busy_case_shm(t, a, VKG_COMM_SHM_AUTO);
}

/* Both ranks compute 1.6 s (longer than the 1 s timeout) between allreduces: the time between
 * calls is theirs, not a stall. */
static void test_steps_longer_than_the_timeout(void **state)
{
    (void)state;
    const busy_arg a = {.iters = 3, .work_us = {1600000, 1600000}};
    busy_case(VKG_COMM_IPC, &a);
}

/* Rank 1 computes 2.5 s before each allreduce while rank 0 is already waiting with a 1 s
 * timeout: rank 1 is alive (its heartbeats answer), so rank 0 keeps waiting. */
static void test_busy_peer_is_not_dead(void **state)
{
    (void)state;
    const busy_arg a = {.iters = 2, .work_us = {0, 2500000}};
    busy_case(VKG_COMM_IPC, &a);
    busy_case(VKG_COMM_TCP, &a);
}

/* Rank 0 works alone 1.5 s (longer than the 1 s timeout) before each burst while rank 1 waits:
 * rank 1's stall notice reaches rank 0, and the stall is over once rank 0 calls. The notice must
 * not outlive it: rank 0's later calls whose sends take a while to drain (1 MiB allreduces and
 * broadcasts: one message to each peer, sent zero-copy; 20 in a row, over tcp and ipc, ZeroMQ
 * alone: shared memory off) must not fail as if the peers still waited for it. */
static void test_stall_notice_does_not_outlive_the_stall(void **state)
{
    (void)state;
    busy_arg a = {.iters = 3, .work_us = {1500000, 0}, .count = 1 << 18, .bursts = 20};
    busy_case_shm(VKG_COMM_TCP, &a, VKG_COMM_SHM_OFF);
    busy_case_shm(VKG_COMM_IPC, &a, VKG_COMM_SHM_OFF);
    a.bcast = 1; /* the root drains right after its sends */
    busy_case_shm(VKG_COMM_TCP, &a, VKG_COMM_SHM_OFF);
    busy_case_shm(VKG_COMM_IPC, &a, VKG_COMM_SHM_OFF);
}

/* A freeze shorter than the timeout (3 s) is survived: rank 1 stopped for 1.5 s mid-run. */
static void test_short_freeze_survives(void **state)
{
    (void)state;
    const busy_arg a = {.iters = 40, .work_us = {100000, 100000}};
    vkg_th_opts o = {.transport = VKG_COMM_IPC, .processes = 1, .timeout_ms = 3000, .wall_s = 60};
    vkg_th_job *j = vkg_th_start(2, &o, busy_body, (void *)&a);
    assert_int_equal(vkg_th_wait_ready(j, 20), 0);
    usleep(500000);
    kill(vkg_th_pid(j, 1), SIGSTOP);
    usleep(1500000);
    kill(vkg_th_pid(j, 1), SIGCONT);
    vkg_th_result res[2];
    vkg_th_finish(j, res, 0);
    int ok = res[0].body_rc == 0 && res[1].body_rc == 0;
    if (!ok)
        vkg_th_dump(res, 2);
    assert_true(ok);
}

/* Two ranks wait for each other in different calls (tcp: liveness on): a cycle, not a busy
 * peer, so both fail within about the timeout naming the cycle (one of them may learn it from
 * the other's abort). */
static int cycle_body(vkg_th_rank *r, void *arg)
{
    (void)arg;
    float x = 0;
    double t = vkg_th_now();
    vkg_status st = vkg_comm_recv(r->comm, 1 - r->rank, 5, &x, sizeof x);
    double dt = vkg_th_now() - t;
    vkg_th_report(r, "%s after %.2f s: %s", vkg_status_name(st), dt, vkg_error_message());
    /* the rank that sees the cycle first fails with it and tells the other, which may get that
     * abort before its own deadline passes: either way both name the cycle */
    return (st == VKG_ERR_TIMEOUT || st == VKG_ERR_PEER) && strstr(vkg_error_message(), "cycle") &&
                   dt < 3.0
               ? 0
               : 1;
}

static void test_cycle_fails_with_liveness(void **state)
{
    (void)state;
    vkg_th_opts o = {.transport = VKG_COMM_TCP, .processes = 1, .timeout_ms = 1000, .wall_s = 30};
    vkg_th_result res[2];
    vkg_th_run(2, &o, cycle_body, NULL, res);
    int ok = res[0].body_rc == 0 && res[1].body_rc == 0;
    if (!ok)
        vkg_th_dump(res, 2);
    assert_true(ok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigkill_tcp),
        cmocka_unit_test(test_sigkill_ipc_master),
        cmocka_unit_test(test_sigstop_ipc),
        cmocka_unit_test(test_sigstop_tcp_pair),
        cmocka_unit_test(test_stall_chain_names_its_end),
        cmocka_unit_test(test_abort_reaches_everyone),
        cmocka_unit_test(test_deadline_names_the_late_rank),
        cmocka_unit_test(test_steps_longer_than_the_timeout),
        cmocka_unit_test(test_busy_peer_is_not_dead),
        cmocka_unit_test(test_stall_notice_does_not_outlive_the_stall),
        cmocka_unit_test(test_short_freeze_survives),
        cmocka_unit_test(test_cycle_fails_with_liveness),
    };
    if (getenv("VKG_TEST_FILTER")) /* e.g. VKG_TEST_FILTER='test_sigstop*' to repeat one case */
        cmocka_set_test_filter(getenv("VKG_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
