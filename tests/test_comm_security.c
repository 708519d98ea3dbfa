/* Security and message validation: messages from a peer that holds the job's secret (a peer
 * with a bug). This test process plays the intruder with its own ZeroMQ socket and hand-made
 * frames (comm_intruder.h: the wire header is encoded from its documented layout, not with the
 * library): a message of another job, of a stale generation, without the secret, with a bad
 * magic, a short header, extra frames, a wrong payload size, claiming to be the receiver or a
 * stall notice naming a rank outside the job is rejected with a clear error and never lands in
 * the receiver's buffer; a frame larger than any legitimate payload is refused before it is
 * buffered. Ranks are threads of this process over ipc or tcp (loopback only).
 * Connections without the job's credentials: test_comm_security_auth.c; the rendezvous:
 * test_comm_security_join.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zmq.h>

#include "comm_intruder.h"
#include "test_comm_harness.h"
#include "vkgpt/comm.h"

static void test_foreign_job_rejected(void **state)
{
    (void)state;
    const unsigned char payload[16] = "intruder payload";
    vkg_wire_hdr h = vkg_intruder_p2p();
    h.job ^= 1;
    vkg_intruder in;
    vkg_intruder_plain(&in, &h, payload, 16);
    vkg_intruder_expect_rejected(VKG_COMM_IPC, &in, "belongs to job");
    vkg_intruder_plain(&in, &h, payload, 16);
    vkg_intruder_expect_rejected(VKG_COMM_TCP, &in, "belongs to job");
}

static void test_stale_generation_rejected(void **state)
{
    (void)state;
    const unsigned char payload[16] = "intruder payload";
    vkg_wire_hdr h = vkg_intruder_p2p();
    h.gen = 3;
    vkg_intruder in;
    vkg_intruder_plain(&in, &h, payload, 16);
    vkg_intruder_expect_rejected(VKG_COMM_IPC, &in, "generation 3");
}

static void test_malformed_frames_rejected(void **state)
{
    (void)state;
    const unsigned char payload[16] = "intruder payload";
    vkg_intruder in;
    vkg_wire_hdr h = vkg_intruder_p2p();
    h.magic = 0x12345678u;
    vkg_intruder_plain(&in, &h, payload, 16);
    vkg_intruder_expect_rejected(VKG_COMM_IPC, &in, "magic");

    h = vkg_intruder_p2p();
    vkg_intruder_plain(&in, &h, payload, 16);
    in.len[0] = 20; /* a truncated header */
    vkg_intruder_expect_rejected(VKG_COMM_IPC, &in, "first frame is 20 bytes");

    h = vkg_intruder_p2p(); /* header says 16 bytes, 8 arrive */
    vkg_intruder_plain(&in, &h, payload, 8);
    vkg_intruder_expect_rejected(VKG_COMM_IPC, &in, "header says 16 payload bytes");

    h = vkg_intruder_p2p(); /* a third frame */
    vkg_intruder_plain(&in, &h, payload, 16);
    memcpy(in.frame[2], "x", 1);
    in.len[2] = 1;
    in.nframes = 3;
    vkg_intruder_expect_rejected(VKG_COMM_IPC, &in, "more than two frames");

    h = vkg_intruder_p2p(); /* a valid header that claims to be the receiver itself */
    h.sender = 1;
    vkg_intruder_plain(&in, &h, payload, 16);
    vkg_intruder_expect_rejected(VKG_COMM_IPC, &in, "not a peer");

    h = vkg_intruder_p2p(); /* a stall notice (kind 8) naming a rank outside the job */
    h.kind = 8;
    h.segment = 5;
    h.bytes = 0;
    vkg_intruder_plain(&in, &h, NULL, 0);
    vkg_intruder_expect_rejected(VKG_COMM_IPC, &in,
                                 "stall notice from rank 0 rejected: it names rank 5");
}

static void test_message_without_secret_rejected(void **state)
{
    (void)state;
    const unsigned char payload[16] = "intruder payload";
    vkg_wire_hdr h = vkg_intruder_p2p();
    vkg_intruder in;
    vkg_intruder_plain(&in, &h, payload, 16);
    in.secret_header = 0;
    vkg_intruder_expect_rejected(VKG_COMM_IPC, &in, "does not carry this job's secret");
}

/* Frames larger than any legitimate payload (here 4 MiB against 2 MiB) are refused before they
 * are buffered, even from a peer holding the secret: nothing arrives, and rank 1 then gets rank
 * 0's real message. */
static void test_oversized_frame_refused(void **state)
{
    (void)state;
    size_t n = 4u << 20;
    unsigned char *big = calloc(1, n);
    assert_non_null(big);
    vkg_wire_hdr h = vkg_intruder_p2p();
    h.bytes = n;
    vkg_intruder in;
    vkg_intruder_plain(&in, &h, "x", 1);
    in.secret_password = 1;
    in.big = big;
    in.big_len = n;
    vkg_scene sc;
    vkg_th_opts o = vkg_scene_opts(VKG_COMM_IPC);
    vkg_scene_run(&sc, &o, &in, 1);
    free(big);
    if (sc.st[1] != VKG_OK)
        fprintf(stderr, "rank 1: %s\n", sc.msg[1]);
    assert_int_equal(sc.st[1], VKG_OK);
    assert_int_equal(sc.st[0], VKG_OK);
    for (int i = 0; i < 16; i++)
        assert_int_equal(sc.got[i], 100 + i);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_foreign_job_rejected),
        cmocka_unit_test(test_stale_generation_rejected),
        cmocka_unit_test(test_malformed_frames_rejected),
        cmocka_unit_test(test_message_without_secret_rejected),
        cmocka_unit_test(test_oversized_frame_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
