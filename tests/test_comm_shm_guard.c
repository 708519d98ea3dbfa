/* Shared memory's handover against processes that are not the job's ranks (transport/shm.c,
 * shm_setup.c): a process that binds a group segment's socket name first, as if it had guessed
 * it, is never handed the segment and never silently switches shared memory off (under the
 * policy REQUIRE, `--transport shm`, the group's first collective fails on every member naming
 * the cause; under the automatic policy the group runs over messages, says so and sums right);
 * and the previous handover version (SipHash proofs) is refused with both versions named, from a
 * rank knocking at a host and from a host answering a rank. Ranks are forked processes over ipc. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../transport/comm_testing.h"
#include "test_comm_harness.h"
#include "vkgpt/comm.h"

#define GROUP_ID 7u
#define COUNT 5

static const uint8_t squat_tag[VKG_SHM_TAG_BYTES] = {
    0x5a, 0x11, 0x7e, 0x42, 0x00, 0x99, 0x13, 0x37, 0xc0, 0xff, 0xee, 0x01, 0x02, 0x03, 0x04, 0x05};

/* Every rank names its next segments by squat_tag, then runs one allreduce in group {0, 1}. */
static int squat_body(vkg_th_rank *r, void *arg)
{
    vkg_comm_shm policy = *(const vkg_comm_shm *)arg;
    vkg__comm_shm_fix_tag(r->comm, squat_tag);
    int members[2] = {0, 1};
    vkg_group_t *g = NULL;
    vkg_status st = vkg_group_create(r->comm, members, 2, GROUP_ID, &g);
    float buf[COUNT];
    for (int i = 0; i < COUNT; i++)
        buf[i] = (float)(r->rank * 10 + i);
    if (st == VKG_OK)
        st = vkg_group_allreduce(g, buf, COUNT, VKG_COMM_F32);
    int wrong = 0;
    for (int i = 0; st == VKG_OK && i < COUNT; i++)
        wrong += buf[i] != (float)(10 + 2 * i);
    int shm = g ? vkg__group_uses_shm(g) : -1;
    vkg_th_report(r, "st=%s shm=%d wrong=%d | %s", vkg_status_name(st), shm, wrong,
                  st ? vkg_error_message() : "");
    vkg_group_destroy(&g);
    if (policy == VKG_COMM_SHM_REQUIRE)
        return !(st == VKG_ERR_UNSUPPORTED &&
                 strstr(vkg_error_message(), "shared memory required (--transport shm)") &&
                 strstr(vkg_error_message(), "group 7") &&
                 strstr(vkg_error_message(), "another process holds the name"));
    return !(st == VKG_OK && shm == 0 && wrong == 0);
}

static void squat_case(vkg_comm_shm policy)
{
    char name[64];
    vkg__shm_socket_name(squat_tag, name, sizeof name);
    int lfd = -1;
    assert_int_equal(vkg__shm_listen(name, &lfd), VKG_OK); /* the squatter binds it first */
    vkg_th_opts o = {.transport = VKG_COMM_IPC, .processes = 1, .shm = policy, .wall_s = 60};
    vkg_th_result res[2];
    vkg_th_run(2, &o, squat_body, &policy, res);
    for (int q = 0; q < 2; q++)
        fprintf(stderr, "  %s rank %d: %s\n", policy == VKG_COMM_SHM_REQUIRE ? "require" : "auto",
                q, res[q].report);
    int ok = 1;
    for (int q = 0; q < 2; q++)
        ok &= res[q].create_status == VKG_OK && res[q].body_rc == 0;
    if (!ok)
        vkg_th_dump(res, 2);
    assert_true(ok);
    /* nobody knocked at the squatter: no rank ever tried to take a segment from it */
    struct pollfd p = {lfd, POLLIN, 0};
    assert_int_equal(poll(&p, 1, 0), 0);
    close(lfd);
}

static void test_squatted_name_fails_required_shm(void **state)
{
    (void)state;
    squat_case(VKG_COMM_SHM_REQUIRE);
}

static void test_squatted_name_visible_fallback(void **state)
{
    (void)state;
    squat_case(VKG_COMM_SHM_AUTO);
}

/* ---- a rank of another user ---- */

/* Rank 0 sees its peers as another user (the test-only VKG_TEST_SHM_PEER_UID: no second user
 * is needed), as it would a rank started by someone else. */
static void other_user(int rank)
{
    if (rank == 0)
        setenv("VKG_TEST_SHM_PEER_UID", "4242", 1);
}

static int nothing(vkg_th_rank *r, void *arg)
{
    (void)r, (void)arg;
    return 0;
}

/* Shared memory required, the handover refused for the user: both ranks fail within a couple of
 * seconds (not the 10 s timeout), naming the user mismatch, not a timeout of rank 0. */
static void test_other_user_named_at_once(void **state)
{
    (void)state;
    vkg_th_opts o = {.transport = VKG_COMM_TCP,
                     .processes = 1,
                     .shm = VKG_COMM_SHM_REQUIRE,
                     .timeout_ms = 10000,
                     .wall_s = 60,
                     .before_create = other_user};
    vkg_th_result res[2];
    double t0 = vkg_th_now();
    vkg_th_run(2, &o, nothing, NULL, res);
    double took = 0.0;
    for (int q = 0; q < 2; q++) {
        fprintf(stderr, "  rank %d after %.2f s: %s\n", q, res[q].t_done - t0, res[q].report);
        took = res[q].t_done - t0 > took ? res[q].t_done - t0 : took;
        assert_int_equal(res[q].create_status, VKG_ERR_UNSUPPORTED);
        assert_non_null(strstr(res[q].report, "another user"));
        assert_non_null(strstr(res[q].report, "uid"));
        assert_null(strstr(res[q].report, "in time"));
    }
    assert_true(took < 5.0);
}

/* ---- the previous handover version ---- */

/* Version 1's message: its second word was the status (0 = ok) where version 2 has the version. */
typedef struct v1_msg {
    uint32_t magic, status, rank, generation;
    uint64_t job_id, bytes;
    uint8_t nonce[16], mac[16];
    char why[256];
} v1_msg;
#define V1_HELLO 0x48534b56u
#define V1_CHAL 0x43534b56u

static int connect_to(const char *name)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path + 1, name, strlen(name));
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    assert_true(fd >= 0);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, len), 0);
    return fd;
}

static void creds(vkg_shm_creds *job, uint8_t tag[VKG_SHM_TAG_BYTES])
{
    *job = (vkg_shm_creds){.job_id = 0x600dcafe12345678ull, .generation = 3};
    for (int i = 0; i < 16; i++) {
        job->secret[i] = (uint8_t)(i * 29 + 1);
        tag[i] = (uint8_t)(i * 7 + 200);
    }
}

static void test_old_rank_refused_by_version(void **state)
{
    (void)state;
    vkg_shm_creds job;
    uint8_t tag[VKG_SHM_TAG_BYTES];
    creds(&job, tag);
    char name[64];
    vkg__shm_socket_name(tag, name, sizeof name);
    int seg = -1, lfd = -1;
    size_t bytes = 0;
    assert_int_equal(vkg__shm_create_fd(&job, 2, 4096, 0, &seg, &bytes), VKG_OK);
    assert_int_equal(vkg__shm_listen(name, &lfd), VKG_OK);
    pid_t host = fork();
    if (host == 0) {
        int refusals = 0;
        vkg_status st =
            vkg__shm_serve(lfd, &job, 2, seg, bytes, vkg__now_ns() + 20000000000LL, &refusals);
        _exit(st == VKG_OK ? refusals : 100);
    }
    /* a rank of version 1 knocks with the right job */
    int fd = connect_to(name);
    v1_msg m = {.magic = V1_HELLO, .rank = 1, .generation = job.generation, .job_id = job.job_id};
    assert_int_equal(send(fd, &m, sizeof m, 0), (ssize_t)sizeof m);
    char reply[1024] = {0};
    ssize_t n = recv(fd, reply, sizeof reply - 1, 0);
    assert_true(n > 0);
    close(fd);
    const char *why = NULL;
    for (ssize_t i = 0; i < n && !why; i++)
        if (strncmp(reply + i, "shared memory handover", 22) == 0)
            why = reply + i;
    assert_non_null(why);
    fprintf(stderr, "  version 1 rank: %s\n", why);
    assert_non_null(strstr(why, "speaks handover version 1, this build speaks version 2"));
    /* this version's rank 1 still attaches */
    int got = -1;
    assert_int_equal(vkg__shm_attach(name, &job, 1, vkg__now_ns() + 3000000000LL, &got, &bytes),
                     VKG_OK);
    close(got);
    int status = 0;
    waitpid(host, &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1); /* one refusal: the old rank */
    close(lfd);
    close(seg);
}

static void test_old_host_refused_by_version(void **state)
{
    (void)state;
    vkg_shm_creds job;
    uint8_t tag[VKG_SHM_TAG_BYTES];
    creds(&job, tag);
    tag[0] ^= 1;
    char name[64];
    vkg__shm_socket_name(tag, name, sizeof name);
    int lfd = -1;
    assert_int_equal(vkg__shm_listen(name, &lfd), VKG_OK);
    pid_t host = fork();
    if (host == 0) { /* a host of version 1: answers any hello with its challenge */
        int cfd = accept(lfd, NULL, NULL);
        char in[1024];
        ssize_t n = cfd >= 0 ? recv(cfd, in, sizeof in, 0) : -1;
        v1_msg r = {
            .magic = V1_CHAL, .rank = 1, .generation = job.generation, .job_id = job.job_id};
        _exit(n > 0 && send(cfd, &r, sizeof r, 0) == (ssize_t)sizeof r ? 0 : 1);
    }
    int got = -1;
    size_t bytes = 0;
    vkg_status st = vkg__shm_attach(name, &job, 1, vkg__now_ns() + 3000000000LL, &got, &bytes);
    fprintf(stderr, "  version 1 host: %s\n", vkg_error_message());
    assert_int_equal(st, VKG_ERR_PROTOCOL);
    assert_int_equal(got, -1);
    assert_non_null(strstr(vkg_error_message(),
                           "the host's first rank speaks handover version 1, this build speaks "
                           "version 2"));
    int status = 0;
    waitpid(host, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(lfd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_squatted_name_fails_required_shm),
        cmocka_unit_test(test_squatted_name_visible_fallback),
        cmocka_unit_test(test_other_user_named_at_once),
        cmocka_unit_test(test_old_rank_refused_by_version),
        cmocka_unit_test(test_old_host_refused_by_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
