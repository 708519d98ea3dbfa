/* Communicator groups (transport/group.c) for N = 1..5 ranks over inproc (threads) and ipc
 * (processes): every rank joins three groups at once (all ranks in reverse order, the ranks of its
 * parity, the pair {0, N-1} for the ranks in it) and runs, interleaved with each other and with
 * the communicator's own allreduce and tagged point-to-point messages, allreduce (lengths 0, 1,
 * < size, not divisible by the size, several thousand), broadcast from every root and allgather.
 * Inputs are integer-valued floats, so every sum is exact: each rank checks its results against
 * the reference, and the parent checks that the members of a group produced bitwise identical
 * bytes. Also: bad groups are refused with the member, id or rank named; and groups whose members
 * share a host (processes over ipc) run in a segment of their own, bitwise equal to the tagged
 * messages' results on inputs whose sums show the order of additions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../transport/comm_testing.h"
#include "test_comm_harness.h"
#include "vkgpt/comm.h"

static const size_t lengths[] = {0, 1, 2, 5, 4099};

static float value(int rank, size_t i, int call)
{
    return (float)((rank * 7 + (int)(i % 97) + call * 3) % 41) - 20.0f;
}

/* One group's calls; returns the number of wrong values; digest over the results. */
static int exercise(vkg_group_t *g, int call, uint64_t *dig)
{
    int n = vkg_group_size(g), me = vkg_group_rank(g), bad = 0;
    for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
        size_t len = lengths[k];
        float *buf = malloc((len + 1) * sizeof *buf);
        for (size_t i = 0; i < len; i++)
            buf[i] = value(vkg_group_member(g, me), i, call);
        if (vkg_group_allreduce(g, buf, len, VKG_COMM_F32) != VKG_OK)
            return 1000;
        for (size_t i = 0; i < len; i++) {
            float want = 0.0f;
            for (int q = 0; q < n; q++)
                want += value(vkg_group_member(g, q), i, call);
            bad += buf[i] != want;
        }
        *dig ^= vkg_th_digest(buf, len * sizeof *buf) + k;
        free(buf);
    }
    for (int root = 0; root < n; root++) {
        int32_t x[3] = {me, root, call};
        if (me == root)
            x[0] = 1000 + root;
        if (vkg_group_broadcast(g, x, sizeof x, root) != VKG_OK)
            return 1000;
        bad += x[0] != 1000 + root || x[1] != root || x[2] != call;
    }
    int32_t mine[2] = {vkg_group_member(g, me), call}, all[2 * 8];
    if (vkg_group_allgather(g, mine, sizeof mine, all) != VKG_OK)
        return 1000;
    for (int q = 0; q < n; q++)
        bad += all[2 * q] != vkg_group_member(g, q) || all[2 * q + 1] != call;
    return bad;
}

static int body(vkg_th_rank *r, void *arg)
{
    (void)arg;
    int n = r->size, me = r->rank, bad = 0;
    int rev[8], par[8], npar = 0, pair[2] = {0, n - 1};
    for (int i = 0; i < n; i++) {
        rev[i] = n - 1 - i;
        if (i % 2 == me % 2)
            par[npar++] = i;
    }
    vkg_group_t *ga = NULL, *gp = NULL, *g2 = NULL;
    if (vkg_group_create(r->comm, rev, n, 1, &ga) != VKG_OK ||
        vkg_group_create(r->comm, par, npar, 2 + (uint32_t)(me % 2), &gp) != VKG_OK ||
        ((me == 0 || me == n - 1) && n > 1 &&
         vkg_group_create(r->comm, pair, 2, 4, &g2) != VKG_OK)) {
        vkg_th_report(r, "create: %s", vkg_error_message());
        return 1;
    }
    uint64_t da = 0, dp = 0, d2 = 0;
    for (int call = 0; call < 3; call++) {
        bad += exercise(ga, call, &da);
        bad += exercise(gp, call, &dp);
        if (g2)
            bad += exercise(g2, call, &d2);
        float x = (float)me; /* the communicator's own collectives in between */
        if (vkg_comm_allreduce(r->comm, &x, &x, 1, VKG_COMM_F32, VKG_COMM_SUM) != VKG_OK)
            bad += 1000;
        bad += x != (float)(n * (n - 1) / 2);
        if (n > 1) { /* and point-to-point along a ring with a user tag */
            int32_t t = me, got = -1;
            if (vkg_comm_send(r->comm, (me + 1) % n, 77, &t, sizeof t) != VKG_OK ||
                vkg_comm_recv(r->comm, (me + n - 1) % n, 77, &got, sizeof got) != VKG_OK)
                bad += 1000;
            bad += got != (me + n - 1) % n;
        }
    }
    if (bad >= 1000)
        vkg_th_report(r, "error: %s ", vkg_error_message());
    vkg_th_report(r, "all=%016llx par%d=%016llx pair=%016llx bad=%d", (unsigned long long)da,
                  me % 2, (unsigned long long)dp, (unsigned long long)d2, bad);
    vkg_group_destroy(&ga), vkg_group_destroy(&gp), vkg_group_destroy(&g2);
    return bad;
}

/* The value after key= in a report ("" when absent). */
static const char *field(const char *report, const char *key, char *out)
{
    const char *p = strstr(report, key);
    out[0] = '\0';
    if (p)
        sscanf(p + strlen(key), "%16s", out);
    return out;
}

static void run(vkg_comm_transport t, int processes)
{
    for (int n = 1; n <= 5; n++) {
        vkg_th_opts o = {.transport = t, .processes = processes, .wall_s = 60};
        vkg_th_result res[VKG_TH_MAX_RANKS];
        vkg_th_run(n, &o, body, NULL, res);
        int ok = 1;
        char a[32], b[32];
        for (int q = 0; q < n; q++) {
            ok &= res[q].create_status == VKG_OK && res[q].body_rc == 0;
            ok &= !strcmp(field(res[q].report, "all=", a), field(res[0].report, "all=", b));
            char key[8];
            snprintf(key, sizeof key, "par%d=", q % 2);
            ok &= !strcmp(field(res[q].report, key, a), field(res[q % 2].report, key, b));
        }
        ok &= !strcmp(field(res[0].report, "pair=", a), field(res[n - 1].report, "pair=", b));
        if (!ok) {
            fprintf(stderr, "%s, %d ranks:\n", vkg_comm_transport_name(t), n);
            vkg_th_dump(res, n);
        }
        assert_true(ok);
    }
}

static void test_inproc(void **state)
{
    (void)state;
    run(VKG_COMM_INPROC, 0);
}

static void test_ipc(void **state)
{
    (void)state;
    run(VKG_COMM_IPC, 1);
}

static int refusals(vkg_th_rank *r, void *arg)
{
    (void)arg;
    vkg_group_t *g = NULL;
    int twice[2] = {0, 0}, other[1] = {1 - r->rank}, far[2] = {0, 9}, ok[2] = {0, 1};
    struct {
        const int *ranks;
        int n;
        uint32_t id;
        const char *needle;
    } cases[] = {
        {twice, 2, 1, "rank 0 is listed twice"},
        {other, 1, 1, "is not a member"},
        {far, 2, 1, "member 1 is rank 9, outside [0, 2)"},
        {ok, 2, VKG_GROUP_MAX_ID + 1, "is over"},
        {ok, 0, 1, "0 members"},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vkg_status st = vkg_group_create(r->comm, cases[i].ranks, cases[i].n, cases[i].id, &g);
        if (st != VKG_ERR_INVALID_ARG || g || !strstr(vkg_error_message(), cases[i].needle)) {
            vkg_th_report(r, "case %zu: status %d, message %s; ", i, (int)st, vkg_error_message());
            bad++;
        }
    }
    return bad;
}

static void test_refusals(void **state)
{
    (void)state;
    vkg_th_opts o = {.transport = VKG_COMM_INPROC, .wall_s = 30};
    vkg_th_result res[VKG_TH_MAX_RANKS];
    vkg_th_run(2, &o, refusals, NULL, res);
    int ok = res[0].body_rc == 0 && res[1].body_rc == 0;
    if (!ok)
        vkg_th_dump(res, 2);
    assert_true(ok);
}

/* ---- groups in shared memory ---- */

static float odd(int rank, size_t i)
{
    uint32_t h = (uint32_t)i * 2654435761u ^ (uint32_t)rank * 40503u;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    return ((float)(h & 0xffff) / 65536.0f - 0.5f) * (float)(1u << (h >> 28));
}

/* 4 ranks; groups {3, 1, 2} (unsorted), {0, 2}, all four in reverse: allreduce of order-revealing
 * sums, broadcast from member 1, allgather; digest of every result. arg: 1 if the groups must run
 * in shared memory, 0 if they must not. */
static int shm_body(vkg_th_rank *r, void *arg)
{
    int want_shm = *(const int *)arg, me = r->rank, bad_path = 0;
    static const int a[] = {3, 1, 2}, b[] = {0, 2}, c[] = {3, 2, 1, 0};
    const int *lists[] = {a, b, c};
    const int sizes[] = {3, 2, 4};
    static const size_t counts[] = {1, 5, 1000, 70001, 300007};
    uint64_t dig = 0;
    vkg_status st = VKG_OK;
    for (int gi = 0; gi < 3 && st == VKG_OK; gi++) {
        int member = 0;
        for (int i = 0; i < sizes[gi]; i++)
            member |= lists[gi][i] == me;
        if (!member)
            continue;
        vkg_group_t *g = NULL;
        st = vkg_group_create(r->comm, lists[gi], sizes[gi], 40 + (uint32_t)gi, &g);
        for (int k = 0; k < 5 && st == VKG_OK; k++) {
            size_t n = counts[k];
            float *x = malloc(n * sizeof *x * 4 + 16);
            for (size_t i = 0; i < n; i++)
                x[i] = odd(me, i);
            st = vkg_group_allreduce(g, x, n, VKG_COMM_F32);
            dig = dig * 1099511628211ull ^ vkg_th_digest(x, n * 4);
            if (st == VKG_OK)
                st = vkg_group_broadcast(g, x, n * 4, 1);
            dig = dig * 1099511628211ull ^ vkg_th_digest(x, n * 4);
            if (st == VKG_OK)
                st = vkg_group_allgather(g, x, n / 4 * 4, x + n);
            dig = dig * 1099511628211ull ^ vkg_th_digest(x + n, n / 4 * 4 * (size_t)sizes[gi]);
            free(x);
        }
        bad_path += g && vkg__group_uses_shm(g) != want_shm;
        vkg_group_destroy(&g);
    }
    vkg_th_report(r, "digest=%016llx bad_path=%d st=%s %s", (unsigned long long)dig, bad_path,
                  vkg_status_name(st), st ? vkg_error_message() : "");
    return st != VKG_OK || bad_path != 0;
}

static void test_shm_like_messages(void **state)
{
    (void)state;
    if (!vkg_comm_has_shm()) {
        fprintf(stderr, "  skipped: this build has no shared-memory collectives\n");
        skip();
    }
    char digest[2][4][24];
    for (int shm = 0; shm <= 1; shm++) {
        vkg_th_opts o = {.transport = VKG_COMM_IPC,
                         .processes = 1,
                         .shm = shm ? VKG_COMM_SHM_AUTO : VKG_COMM_SHM_OFF,
                         .shm_chunk_bytes = 16384,
                         .wall_s = 120};
        vkg_th_result res[4];
        vkg_th_run(4, &o, shm_body, &shm, res);
        int ok = 1;
        for (int q = 0; q < 4; q++) {
            ok &= res[q].create_status == VKG_OK && res[q].body_rc == 0;
            snprintf(digest[shm][q], sizeof digest[shm][q], "%.23s", res[q].report);
        }
        if (!ok)
            vkg_th_dump(res, 4);
        assert_true(ok);
    }
    for (int q = 0; q < 4; q++) {
        fprintf(stderr, "  rank %d: shm %s | messages %s\n", q, digest[1][q], digest[0][q]);
        assert_string_equal(digest[1][q], digest[0][q]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inproc),
        cmocka_unit_test(test_ipc),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_shm_like_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
