/* Security: connections without the job's credentials. This test process plays the intruder
 * with its own ZeroMQ socket (comm_intruder.h): without credentials, with another job's, or with
 * the guessable job-id password (all anyone who can reach the port could compute), the connection
 * is refused and nothing arrives, and a forged allreduce contribution leaves the sum exactly what
 * the ranks computed; with CURVE, ranks holding the job key work, and a client with another key
 * (or PLAIN against a CURVE server) is refused. Ranks are threads of this process over ipc or tcp
 * (loopback only). Messages from a peer holding the secret: test_comm_security.c; the
 * rendezvous: test_comm_security_join.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <zmq.h>

#include "comm_intruder.h"
#include "test_comm_harness.h"
#include "vkgpt/comm.h"

static void test_no_credentials_refused(void **state)
{
    (void)state;
    const unsigned char payload[16] = "intruder payload";
    vkg_wire_hdr h =
        vkg_intruder_p2p(); /* a perfectly valid message: only the credentials are missing */
    vkg_intruder in;
    vkg_intruder_plain(&in, &h, payload, 16);
    in.mech = MECH_NULL;
    vkg_intruder_expect_refused(VKG_COMM_IPC, &in);
    vkg_intruder_plain(&in, &h, payload, 16);
    in.mech = MECH_NULL;
    vkg_intruder_expect_refused(VKG_COMM_TCP, &in);
}

/* The job id is computed from public facts (launcher, address, port, world size), so its
 * password admits no data connection: a perfectly formed message from someone who computed it
 * is refused at the handshake. */
static void test_guessable_credentials_refused(void **state)
{
    (void)state;
    const unsigned char payload[16] = "intruder payload";
    vkg_wire_hdr h = vkg_intruder_p2p();
    vkg_intruder in;
    vkg_intruder_plain(&in, &h, payload, 16);
    in.secret_header = 0; /* the intruder cannot know the secret */
    vkg_intruder_expect_refused(VKG_COMM_IPC, &in);
    assert_int_equal(in.handshake, ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
    vkg_intruder_plain(&in, &h, payload, 16);
    in.secret_header = 0;
    vkg_intruder_expect_refused(VKG_COMM_TCP, &in);
    assert_int_equal(in.handshake, ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
}

/* A forged allreduce contribution (rank 0's one-step message of the first allreduce, with the
 * guessable credentials) is refused; both ranks get exactly the sum they computed. */
static void test_forged_allreduce_data_refused(void **state)
{
    (void)state;
    const float forged[4] = {1000, 1000, 1000, 1000};
    vkg_wire_hdr h = vkg_intruder_p2p();
    h.kind = 4; /* data */
    h.flags = 0;
    h.seq = 2;                                /* the first collective after create's barrier */
    h.tag = 1u | (0u << 8) | (0xffffu << 16); /* allreduce, f32, one-step */
    vkg_intruder in;
    for (int t = 0; t < 2; t++) {
        vkg_intruder_plain(&in, &h, forged, sizeof forged);
        in.secret_header = 0;
        vkg_scene sc;
        vkg_th_opts o = vkg_scene_opts(t ? VKG_COMM_TCP : VKG_COMM_IPC);
        vkg_scene_run(&sc, &o, &in, 2);
        if (sc.st[0] || sc.st[1])
            fprintf(stderr, "rank 0: %s\nrank 1: %s\n", sc.msg[0], sc.msg[1]);
        assert_int_equal(in.handshake, ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
        assert_int_equal(sc.st[0], VKG_OK);
        assert_int_equal(sc.st[1], VKG_OK);
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < 4; i++)
                assert_true(sc.sum[r][i] == (float)(3 * (i + 1)));
    }
}

/* A peer with the right connection password whose header lacks the secret is rejected. */
static void test_other_job_credentials_refused(void **state)
{
    (void)state;
    const unsigned char payload[16] = "intruder payload";
    vkg_wire_hdr h = vkg_intruder_p2p();
    vkg_intruder in;
    vkg_intruder_plain(&in, &h, payload, 16);
    snprintf(in.password, sizeof in.password, "%016llx:%u", (unsigned long long)(JOB + 1), 0u);
    vkg_intruder_expect_refused(VKG_COMM_TCP, &in);
    assert_int_equal(in.handshake, ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
}

/* ---- CURVE ---- */

static int curve_body(vkg_th_rank *r, void *arg)
{
    (void)arg;
    float x[3000];
    for (int i = 0; i < 3000; i++)
        x[i] = (float)(i % 5 + r->rank);
    vkg_status st = vkg_comm_allreduce(r->comm, x, x, 3000, VKG_COMM_F32, VKG_COMM_SUM);
    int bad = st != VKG_OK;
    for (int i = 0; i < 3000 && !bad; i++)
        bad = x[i] != (float)(2 * (i % 5) + 1);
    vkg_th_report(r, "%s %s", vkg_status_name(st), vkg_error_message());
    return bad;
}

static void test_curve_admits_job_key(void **state)
{
    (void)state;
    if (!vkg_comm_has_curve())
        skip();
    vkg_th_opts o = {.transport = VKG_COMM_TCP, .timeout_ms = 5000, .job_id = JOB, .wall_s = 30};
    assert_int_equal(vkg_comm_curve_keypair(o.curve_pub, o.curve_sec), VKG_OK);
    vkg_th_result res[2];
    vkg_th_run(2, &o, curve_body, NULL, res);
    if (res[0].body_rc || res[1].body_rc)
        vkg_th_dump(res, 2);
    assert_int_equal(res[0].body_rc, 0);
    assert_int_equal(res[1].body_rc, 0);
}

static void test_curve_refuses_other_keys(void **state)
{
    (void)state;
    if (!vkg_comm_has_curve())
        skip();
    char job_pub[41], job_sec[41], other_pub[41], other_sec[41];
    assert_int_equal(vkg_comm_curve_keypair(job_pub, job_sec), VKG_OK);
    assert_int_equal(vkg_comm_curve_keypair(other_pub, other_sec), VKG_OK);
    const unsigned char payload[16] = "intruder payload";
    vkg_wire_hdr h = vkg_intruder_p2p();
    for (int variant = 0; variant < 2; variant++) {
        vkg_intruder in;
        vkg_intruder_plain(&in, &h, payload, 16);
        if (variant == 0) { /* the right server key, an unauthorized client key */
            in.mech = MECH_CURVE;
            snprintf(in.server_key, sizeof in.server_key, "%s", job_pub);
            snprintf(in.pub, sizeof in.pub, "%s", other_pub);
            snprintf(in.sec, sizeof in.sec, "%s", other_sec);
        } /* variant 1: the job id password, but PLAIN against a CURVE server */
        vkg_scene sc;
        vkg_th_opts o = vkg_scene_opts(VKG_COMM_IPC);
        snprintf(o.curve_pub, sizeof o.curve_pub, "%s", job_pub);
        snprintf(o.curve_sec, sizeof o.curve_sec, "%s", job_sec);
        vkg_scene_run(&sc, &o, &in, 1);
        if (sc.st[1] != VKG_OK)
            fprintf(stderr, "variant %d: rank 1: %s\n", variant, sc.msg[1]);
        assert_true(in.handshake != 0 && in.handshake != ZMQ_EVENT_HANDSHAKE_SUCCEEDED);
        assert_int_equal(sc.st[1], VKG_OK);
        for (int i = 0; i < 16; i++)
            assert_int_equal(sc.got[i], 100 + i);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_credentials_refused),
        cmocka_unit_test(test_other_job_credentials_refused),
        cmocka_unit_test(test_guessable_credentials_refused),
        cmocka_unit_test(test_forged_allreduce_data_refused),
        cmocka_unit_test(test_curve_admits_job_key),
        cmocka_unit_test(test_curve_refuses_other_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
