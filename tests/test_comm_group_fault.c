/* Faults in a communicator group's own shared-memory segment (transport/group.c, shm_setup.c):
 * 3 processes on one host (ipc), one group of all of them in reverse rank order, so that group
 * ranks and communicator ranks differ, running large allreduces (16 MiB, many pipeline steps) in
 * the group's segment. Asserts that the group really runs in its segment, and then:
 *  - a member killed (SIGKILL) or frozen (SIGSTOP) is an error naming its communicator rank on
 *    every other member within twice the timeout (never a hang); the test prints how long the
 *    slowest survivor took;
 *  - vkg_comm_abort on one member reaches the others through the group's segment (the error names
 *    the group's shm collective, the aborting rank and its reason) long before the timeout;
 *  - a group may be destroyed after its communicator (the pipeline strategy does that). */
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

#include "../transport/comm_testing.h"
#include "test_comm_harness.h"
#include "vkgpt/comm.h"

#define NRANKS 3
#define FAULT_TIMEOUT_MS 1500
#define FAULT_COUNT (4u << 20) /* 16 MiB: many pipeline steps per allreduce */
#define GROUP_ID 7

static vkg_th_opts fault_opts(int timeout_ms)
{
    vkg_th_opts o = {.transport = VKG_COMM_IPC,
                     .processes = 1,
                     .timeout_ms = timeout_ms,
                     .shm = VKG_COMM_SHM_REQUIRE,
                     .wall_s = 30};
    return o;
}

/* The group of every rank in reverse order, which must run in a segment of its own (after one
 * allreduce of x). */
static vkg_status make_group(vkg_th_rank *r, float *x, vkg_group_t **g)
{
    int ranks[NRANKS];
    for (int i = 0; i < NRANKS; i++)
        ranks[i] = NRANKS - 1 - i;
    vkg_status st = vkg_group_create(r->comm, ranks, NRANKS, GROUP_ID, g);
    if (st == VKG_OK)
        st = vkg_group_allreduce(*g, x, FAULT_COUNT, VKG_COMM_F32);
    if (st == VKG_OK && !vkg__group_uses_shm(*g)) {
        vkg_th_report(r, "the group does not run in a segment; ");
        st = VKG_ERR_STATE;
    }
    return st;
}

static int loop_until_error(vkg_th_rank *r, void *arg)
{
    (void)arg;
    float *x = calloc(FAULT_COUNT, sizeof *x);
    vkg_group_t *g = NULL;
    vkg_status st = make_group(r, x, &g);
    vkg_th_ready(r);
    for (long it = 0; st == VKG_OK && it < 1000000; it++)
        st = vkg_group_allreduce(g, x, FAULT_COUNT, VKG_COMM_F32);
    vkg_th_report(r, "%s: %s", vkg_status_name(st), vkg_error_message());
    vkg_group_destroy(&g);
    free(x);
    return st == VKG_OK ? 0 : 1;
}

static void fault_case(int victim, int sig)
{
    vkg_th_opts o = fault_opts(FAULT_TIMEOUT_MS);
    assert_true(vkg_th_fault(NRANKS, &o, loop_until_error, NULL, victim, sig,
                             2.0 * FAULT_TIMEOUT_MS / 1000.0, "group segment, 3 ranks"));
}

static void test_sigkill(void **state)
{
    (void)state;
    fault_case(1, SIGKILL);
    fault_case(0, SIGKILL);
}

static void test_sigstop(void **state)
{
    (void)state;
    fault_case(2, SIGSTOP);
}

/* Rank 1 aborts while the others wait in a large group allreduce: they learn it through the
 * group's segment (the message names the group's shm collective), with its reason, long before
 * the timeout. */
static int abort_body(vkg_th_rank *r, void *arg)
{
    (void)arg;
    float *x = calloc(FAULT_COUNT, sizeof *x);
    vkg_group_t *g = NULL;
    vkg_status st = make_group(r, x, &g);
    double t = vkg_th_now();
    if (st == VKG_OK && r->rank == 1) {
        usleep(300000);
        vkg_comm_abort(r->comm, "the loss went NaN");
        st = VKG_ERR_ABORTED;
    } else if (st == VKG_OK) {
        st = vkg_group_allreduce(g, x, FAULT_COUNT, VKG_COMM_F32);
    }
    double dt = vkg_th_now() - t;
    vkg_th_report(r, "%s after %.2f s: %s", vkg_status_name(st), dt, vkg_error_message());
    vkg_group_destroy(&g);
    free(x);
    if (r->rank == 1)
        return st != VKG_ERR_ABORTED;
    char want[64];
    snprintf(want, sizeof want, "group %d allreduce #", GROUP_ID);
    return !(st == VKG_ERR_PEER && strstr(vkg_error_message(), want) &&
             strstr(vkg_error_message(), "(shm): rank 1 aborted") &&
             strstr(vkg_error_message(), "the loss went NaN") && dt < 2.0);
}

static void test_abort_through_the_group_segment(void **state)
{
    (void)state;
    vkg_th_opts o = fault_opts(10000);
    vkg_th_result res[NRANKS];
    vkg_th_run(NRANKS, &o, abort_body, NULL, res);
    fprintf(stderr, "  rank 0: %s\n", res[0].report);
    assert_true(vkg_th_agree(res, NRANKS, 0)); /* every body's checks held */
}

/* The pipeline strategy destroys its communicator before its groups: a group with a segment may
 * outlive the communicator that lists it (destroying it after must touch nothing freed; the
 * sanitizer build would catch it). */
static int outlive_body(vkg_th_rank *r, void *arg)
{
    (void)arg;
    float *x = calloc(FAULT_COUNT, sizeof *x);
    vkg_group_t *g = NULL;
    vkg_status st = make_group(r, x, &g);
    vkg_comm_destroy(&r->comm);
    vkg_group_destroy(&g);
    free(x);
    vkg_th_report(r, "%s", vkg_status_name(st));
    return st != VKG_OK;
}

static void test_group_outlives_comm(void **state)
{
    (void)state;
    vkg_th_opts o = fault_opts(10000);
    vkg_th_result res[NRANKS];
    vkg_th_run(NRANKS, &o, outlive_body, NULL, res);
    assert_true(vkg_th_agree(res, NRANKS, 0)); /* a crashed rank never reports */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_outlives_comm),
        cmocka_unit_test(test_abort_through_the_group_segment),
        cmocka_unit_test(test_sigkill),
        cmocka_unit_test(test_sigstop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
