/* Security of the rendezvous: who can join a job. A rank of another job, or of a job of another
 * world size, cannot join (and rank 0 says which rank it misses, or what did not match); a
 * wildcard master address, which would listen on every interface, is refused unless asked for;
 * with CURVE, a rank with a key rank 0 does not know cannot join, and a rank holding a wrong copy
 * of rank 0's public key is told so by name. Ranks are threads of this process over tcp
 * (loopback only). Messages and connections: test_comm_security.c,
 * test_comm_security_auth.c. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "comm_intruder.h" /* JOB */
#include "vkgpt/comm.h"

/* A rank of another job points at our master port: refused at the handshake; our rank 0 then
 * misses its rank 1 and says so. */
typedef struct join_arg {
    vkg_comm_config cfg;
    vkg_status st;
    char msg[1024];
} join_arg;

/* Rank 0's configuration of a 2-rank tcp job on a free loopback port (rank 1's is a copy with
 * rank = 1). */
static void pair_config(vkg_comm_config *c0, int timeout_ms)
{
    vkg_comm_config_default(c0);
    c0->world_size = 2;
    c0->job_id = JOB;
    c0->timeout_ms = timeout_ms;
    assert_int_equal(vkg_comm_pick_port("127.0.0.1", &c0->master_port), VKG_OK);
}

/* Rank 1's configuration: rank 0's as it is now, with rank = 1. */
static vkg_comm_config rank1_of(const vkg_comm_config *c0)
{
    vkg_comm_config c1 = *c0;
    c1.rank = 1;
    return c1;
}

static void *join_thread(void *p)
{
    join_arg *a = p;
    vkg_comm_t *c = NULL;
    a->st = vkg_comm_create(&a->cfg, &c);
    snprintf(a->msg, sizeof a->msg, "%s", vkg_error_message());
    vkg_comm_destroy(&c);
    return NULL;
}

static void join_pair(const vkg_comm_config *c0, const vkg_comm_config *c1, join_arg *a)
{
    pthread_t th[2];
    a[0].cfg = *c0;
    a[1].cfg = *c1;
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, join_thread, &a[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
}

static void test_rendezvous_refuses_other_job(void **state)
{
    (void)state;
    vkg_comm_config c0;
    pair_config(&c0, 1500);
    vkg_comm_config c1 = rank1_of(&c0);
    c1.job_id = JOB + 1;
    join_arg a[2];
    join_pair(&c0, &c1, a);
    assert_int_equal(a[1].st, VKG_ERR_PEER);
    assert_non_null(strstr(a[1].msg, "refused this rank's credentials"));
    assert_int_equal(a[0].st, VKG_ERR_TIMEOUT);
    assert_non_null(strstr(a[0].msg, "missing: 1"));
}

static void test_rendezvous_rejects_wrong_world(void **state)
{
    (void)state;
    vkg_comm_config c0;
    pair_config(&c0, 3000);
    vkg_comm_config c1 = rank1_of(&c0);
    c1.world_size = 3;
    join_arg a[2];
    join_pair(&c0, &c1, a);
    assert_int_equal(a[0].st, VKG_ERR_MISMATCH);
    assert_non_null(strstr(a[0].msg, "world size 3"));
    assert_int_equal(a[1].st, VKG_ERR_PEER);
    assert_non_null(strstr(a[1].msg, "rejected rank 1"));
}

/* A wildcard master address would make rank 0 listen on every interface: refused unless asked
 * for; asked for, a job runs. */
static void test_wildcard_master_needs_listen_all(void **state)
{
    (void)state;
    vkg_comm_config c0;
    pair_config(&c0, 3000);
    snprintf(c0.master_addr, sizeof c0.master_addr, "0.0.0.0");
    vkg_comm_t *c = NULL;
    assert_int_equal(vkg_comm_create(&c0, &c), VKG_ERR_INVALID_ARG);
    assert_null(c);
    assert_non_null(strstr(vkg_error_message(), "every interface"));
    assert_non_null(strstr(vkg_error_message(), "VKG_COMM_LISTEN_ALL=1"));
    c0.listen_all = 1;
    vkg_comm_config c1 = rank1_of(&c0);
    join_arg a[2];
    join_pair(&c0, &c1, a);
    if (a[0].st || a[1].st)
        fprintf(stderr, "rank 0: %s\nrank 1: %s\n", a[0].msg, a[1].msg);
    assert_int_equal(a[0].st, VKG_OK);
    assert_int_equal(a[1].st, VKG_OK);
}

static void test_curve_rank_with_wrong_key_cannot_join(void **state)
{
    (void)state;
    if (!vkg_comm_has_curve())
        skip();
    vkg_comm_config c0;
    pair_config(&c0, 1500);
    assert_int_equal(vkg_comm_curve_keypair(c0.curve_public, c0.curve_secret), VKG_OK);
    vkg_comm_config c1 = rank1_of(&c0);
    snprintf(c1.curve_master, sizeof c1.curve_master, "%s", c0.curve_public);
    assert_int_equal(vkg_comm_curve_keypair(c1.curve_public, c1.curve_secret), VKG_OK);
    join_arg a[2];
    join_pair(&c0, &c1, a);
    assert_int_equal(a[1].st, VKG_ERR_PEER);
    assert_non_null(strstr(a[1].msg, "refused"));
    assert_int_equal(a[0].st, VKG_ERR_TIMEOUT);
}

/* Rank 1 holds a wrong copy of rank 0's public key: its error names the key, not "is rank 0
 * running?". */
static void test_curve_wrong_master_key_named(void **state)
{
    (void)state;
    if (!vkg_comm_has_curve())
        skip();
    vkg_comm_config c0;
    pair_config(&c0, 1500);
    assert_int_equal(vkg_comm_curve_keypair(c0.curve_public, c0.curve_secret), VKG_OK);
    vkg_comm_config c1 = rank1_of(&c0);
    char other_sec[41];
    assert_int_equal(vkg_comm_curve_keypair(c1.curve_master, other_sec), VKG_OK);
    join_arg a[2];
    join_pair(&c0, &c1, a);
    if (a[1].st != VKG_ERR_PEER || !strstr(a[1].msg, c1.curve_master))
        fprintf(stderr, "rank 1: %s\n", a[1].msg);
    assert_int_equal(a[1].st, VKG_ERR_PEER);
    assert_non_null(strstr(a[1].msg, "public key"));
    assert_non_null(strstr(a[1].msg, c1.curve_master));
    assert_null(strstr(a[1].msg, "is rank 0 running"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rendezvous_refuses_other_job),
        cmocka_unit_test(test_rendezvous_rejects_wrong_world),
        cmocka_unit_test(test_wildcard_master_needs_listen_all),
        cmocka_unit_test(test_curve_rank_with_wrong_key_cannot_join),
        cmocka_unit_test(test_curve_wrong_master_key_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
