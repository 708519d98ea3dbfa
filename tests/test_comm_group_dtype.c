/* Group collectives with a dtype (transport/group.c): vkg_group_allreduce, _reduce_scatter and
 * _allgatherv in fp32 and bf16, on 1 to 5 ranks, over each engine a group has: tagged messages
 * (threads over inproc; processes over ipc with shared memory off) and the members' segment
 * (processes over ipc), and on the world group (vkg_group_world), whose collectives must be the
 * communicator's own.
 *
 * Every rank joins three groups: all ranks in reverse order, the ranks of its parity in order, and
 * the world. Inputs are indexed by group rank and reveal the order of additions: fp32 values whose
 * magnitudes spread over 2^12, bf16 values whose fp32 sums depend on the order and whose rounding
 * shows the rounding mode (vkg_th_sc_input). The references are written here from the contract in
 * vkgpt/comm.h, not from group.c: fp32 element i of ring chunk k (the buffer cut in size nearly
 * equal chunks, the first n mod size one longer) summed from member k on around the members; bf16
 * widened, summed in fp32 in member order and rounded once to nearest even
 * (vkg_th_sc_reference). The world group is compared with vkg_comm_allreduce /
 * vkg_comm_reduce_scatter_dtype / vkg_comm_allgatherv on the same inputs, bit for bit. The
 * reduce-scatters and allgathervs use uneven chunks, one of them empty, and every result is
 * checked bitwise. The compressed allreduce (vkg_group_allreduce_codec) runs with a codec of this
 * file's (each float cut to its top 16 bits, blocks of an odd byte count) against the contract:
 * the cut values summed in fp32 in group-rank order, member 0's stored first. Also: a dtype other
 * than fp32 and bf16, bounds that do not cover the buffer and a codec missing a function are
 * refused naming them, and the group stays usable. */
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

static const size_t counts[] = {0, 1, 7, 1000, 20011};
#define NCOUNTS (sizeof counts / sizeof counts[0])

/* Group rank j's fp32 input at element i (call k varies it). */
static float in32(int j, size_t i, int k)
{
    return vkg_th_odd_value(j * 7 + k, i, 12);
}

/* Ring chunk k of n elements over m members: [*off, *off + *len). */
static void ring_chunk(size_t n, int m, int k, size_t *off, size_t *len)
{
    size_t base = n / (size_t)m, extra = n % (size_t)m;
    *off = (size_t)k * base + ((size_t)k < extra ? (size_t)k : extra);
    *len = base + ((size_t)k < extra ? 1 : 0);
}

/* The fp32 group allreduce's element i over m members: from member k (its ring chunk) on. */
static float ref32(size_t n, int m, size_t i, int call)
{
    int k = 0;
    for (int q = 0; q < m; q++) {
        size_t off, len;
        ring_chunk(n, m, q, &off, &len);
        if (i >= off && i < off + len)
            k = q;
    }
    float acc = in32(k, i, call);
    for (int j = 1; j < m; j++)
        acc = acc + in32((k + j) % m, i, call);
    return acc;
}

/* Uneven bounds over m members: member q's chunk grows with q, member 1's is empty (m > 2). */
static void uneven(size_t n, int m, size_t *b)
{
    size_t w = 0;
    for (int q = 0; q < m; q++)
        w += (size_t)(q == 1 && m > 2 ? 0 : q + 1);
    b[0] = 0;
    size_t acc = 0;
    for (int q = 0; q < m; q++) {
        acc += (size_t)(q == 1 && m > 2 ? 0 : q + 1);
        b[q + 1] = w ? n * acc / w : n;
    }
}

/* This member's inputs for call `call` in dtype dt. */
static void fill(void *buf, size_t n, vkg_comm_dtype dt, int j, int call)
{
    for (size_t i = 0; i < n; i++) {
        if (dt == VKG_COMM_F32)
            ((float *)buf)[i] = in32(j, i, call);
        else
            ((uint16_t *)buf)[i] = vkg_th_sc_input(call, j, i);
    }
}

/* Elements of [lo, hi) of got that differ from the reference (world: want, the communicator's). */
static int wrong(const void *got, const void *want, size_t n, size_t lo, size_t hi,
                 vkg_comm_dtype dt, int m, int call)
{
    int bad = 0;
    for (size_t i = lo; i < hi; i++) {
        if (dt == VKG_COMM_F32) {
            float g = ((const float *)got)[i];
            float w = want ? ((const float *)want)[i] : ref32(n, m, i, call);
            bad += memcmp(&g, &w, sizeof g) != 0;
        } else {
            uint16_t g = ((const uint16_t *)got)[i];
            uint16_t w = want ? ((const uint16_t *)want)[i] : vkg_th_sc_reference(call, m, i, 0, 0);
            bad += g != w;
        }
    }
    return bad;
}

/* The test codec: each float's top 16 bits (truncated, not rounded), 2 n + 1 bytes a block. */
static size_t cut_bytes(size_t n, void *ctx)
{
    (void)ctx;
    return 2 * n + 1;
}

static float cut(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u &= 0xFFFF0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

static void cut_pack(const float *x, size_t n, void *block, void *ctx)
{
    (*(int *)ctx)++; /* the caller's state reaches the codec */
    unsigned char *b = block;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        b[2 * i] = (unsigned char)(u >> 16), b[2 * i + 1] = (unsigned char)(u >> 24);
    }
}

static void cut_unpack_add(const void *block, size_t n, int first, float *sum, void *ctx)
{
    (void)ctx;
    const unsigned char *b = block;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = ((uint32_t)b[2 * i] | (uint32_t)b[2 * i + 1] << 8) << 16;
        float y;
        memcpy(&y, &u, sizeof y);
        sum[i] = first ? y : sum[i] + y;
    }
}

/* The compressed allreduce of every count: wrong elements against the contract's sum. */
static int exercise_codec(vkg_group_t *g, vkg_status *st)
{
    int m = vkg_group_size(g), me = vkg_group_rank(g), bad = 0, packs = 0;
    vkg_comm_codec codec = {
        .bytes = cut_bytes, .pack = cut_pack, .unpack_add = cut_unpack_add, .ctx = &packs};
    for (size_t ci = 0; ci < NCOUNTS && *st == VKG_OK; ci++) {
        size_t n = counts[ci];
        float *x = malloc((n + 1) * sizeof *x);
        for (size_t i = 0; i < n; i++)
            x[i] = in32(me, i, 100 + (int)ci);
        *st = vkg_group_allreduce_codec(g, x, n, &codec);
        for (size_t i = 0; *st == VKG_OK && i < n; i++) {
            float w = cut(in32(0, i, 100 + (int)ci));
            for (int q = 1; q < m; q++)
                w += cut(in32(q, i, 100 + (int)ci));
            bad += memcmp(&x[i], &w, sizeof w) != 0;
        }
        bad += *st == VKG_OK && packs != (int)ci; /* n = 0 packs nothing */
        free(x);
    }
    return bad;
}

/* The world group's reference: the communicator's own collective on the same inputs. */
static vkg_status world_ref(vkg_comm_t *c, void *buf, size_t n, vkg_comm_dtype dt, int op,
                            const size_t *b)
{
    if (op == 0)
        return vkg_comm_allreduce(c, buf, buf, n, dt, VKG_COMM_SUM);
    if (op == 1)
        return vkg_comm_reduce_scatter_dtype(c, buf, n, b, dt);
    return vkg_comm_allgatherv(c, buf, n, b);
}

/* One group: every count x dtype x (allreduce, reduce-scatter, allgatherv). Returns the wrong
 * elements; *st the first failure. */
static int exercise(vkg_comm_t *c, vkg_group_t *g, int world, vkg_status *st)
{
    int m = vkg_group_size(g), me = vkg_group_rank(g), bad = 0, call = 0;
    for (size_t ci = 0; ci < NCOUNTS && *st == VKG_OK; ci++) {
        size_t n = counts[ci], b[VKG_TH_MAX_RANKS + 1];
        uneven(n, m, b);
        for (int d = 0; d < 2 && *st == VKG_OK; d++) {
            vkg_comm_dtype dt = d ? VKG_COMM_BF16 : VKG_COMM_F32;
            size_t es = d ? 2 : 4;
            unsigned char *x = malloc(n * es + 4), *ref = malloc(n * es + 4);
            for (int op = 0; op < 3 && *st == VKG_OK; op++, call++) {
                if (op == 2 && world && dt == VKG_COMM_BF16) /* the communicator has fp32 only */
                    continue;
                fill(x, n, dt, me, call);
                if (op == 2) /* the others' chunks poisoned: the gather must fill them */
                    for (size_t i = 0; i < n * es; i++)
                        if (i < b[me] * es || i >= b[me + 1] * es)
                            x[i] = 0xA5;
                memcpy(ref, x, n * es);
                *st = op == 0   ? vkg_group_allreduce(g, x, n, dt)
                      : op == 1 ? vkg_group_reduce_scatter(g, x, n, b, dt)
                                : vkg_group_allgatherv(g, x, n, b, dt);
                if (*st == VKG_OK && world)
                    *st = world_ref(c, ref, n, dt, op, b);
                if (*st != VKG_OK)
                    break;
                if (op == 2) { /* every chunk is its member's input */
                    for (int q = 0; q < m; q++) {
                        fill(ref, n, dt, q, call);
                        bad += memcmp(x + b[q] * es, ref + b[q] * es, (b[q + 1] - b[q]) * es) != 0;
                    }
                    continue;
                }
                size_t lo = op == 1 ? b[me] : 0, hi = op == 1 ? b[me + 1] : n;
                bad += wrong(x, world ? ref : NULL, n, lo, hi, dt, m, call);
            }
            free(x), free(ref);
        }
    }
    return bad;
}

/* arg: 1 when the groups of several members must run in their segment, 0 when they must not. */
static int body(vkg_th_rank *r, void *arg)
{
    int want = *(const int *)arg, n = r->size, me = r->rank, bad = 0, bad_path = 0;
    int rev[VKG_TH_MAX_RANKS], par[VKG_TH_MAX_RANKS], npar = 0;
    for (int i = 0; i < n; i++) {
        rev[i] = n - 1 - i;
        if (i % 2 == me % 2)
            par[npar++] = i;
    }
    vkg_group_t *ga = NULL, *gp = NULL, *gw = NULL;
    vkg_status st = vkg_group_create(r->comm, rev, n, 1, &ga);
    if (st == VKG_OK)
        st = vkg_group_create(r->comm, par, npar, 2 + (uint32_t)(me % 2), &gp);
    if (st == VKG_OK)
        st = vkg_group_world(r->comm, 4, &gw);
    if (st == VKG_OK)
        bad += exercise(r->comm, ga, 0, &st);
    if (st == VKG_OK)
        bad += exercise(r->comm, gp, 0, &st);
    if (st == VKG_OK)
        bad += exercise(r->comm, gw, 1, &st);
    if (st == VKG_OK)
        bad += exercise_codec(ga, &st);
    if (st == VKG_OK)
        bad += exercise_codec(gp, &st);
    if (st == VKG_OK)
        bad += exercise_codec(gw, &st);
    bad_path += ga && n > 1 && vkg__group_uses_shm(ga) != want;
    bad_path += gp && npar > 1 && vkg__group_uses_shm(gp) != want;
    vkg_th_report(r, "bad=%d bad_path=%d st=%s %s", bad, bad_path, vkg_status_name(st),
                  st ? vkg_error_message() : "");
    vkg_group_destroy(&ga), vkg_group_destroy(&gp), vkg_group_destroy(&gw);
    return st != VKG_OK || bad != 0 || bad_path != 0;
}

static void run(vkg_comm_transport t, int processes, vkg_comm_shm shm)
{
    for (int n = 1; n <= 5; n++) {
        vkg_th_opts o = {.transport = t,
                         .processes = processes,
                         .shm = shm,
                         .shm_chunk_bytes = 16384,
                         .wall_s = 120};
        vkg_th_result res[VKG_TH_MAX_RANKS];
        int want = processes && shm == VKG_COMM_SHM_AUTO && vkg_comm_has_shm();
        vkg_th_run(n, &o, body, &want, res);
        int ok = 1;
        for (int q = 0; q < n; q++)
            ok &= res[q].create_status == VKG_OK && res[q].body_rc == 0;
        if (!ok) {
            fprintf(stderr, "%s (shm %s), %d ranks:\n", vkg_comm_transport_name(t),
                    vkg_comm_shm_name(shm), n);
            vkg_th_dump(res, n);
        }
        assert_true(ok);
    }
}

static void test_messages_threads(void **state)
{
    (void)state;
    run(VKG_COMM_INPROC, 0, VKG_COMM_SHM_OFF);
}

static void test_messages_processes(void **state)
{
    (void)state;
    run(VKG_COMM_IPC, 1, VKG_COMM_SHM_OFF);
}

static void test_segment(void **state)
{
    (void)state;
    run(VKG_COMM_IPC, 1, VKG_COMM_SHM_AUTO);
}

/* The reference itself: a ring started at another member, and a bf16 sum rounded toward zero,
 * must differ from the contract's on these inputs (so the checks above can fail). */
static void test_reference_bites(void **state)
{
    (void)state;
    int differ32 = 0, differ16 = 0;
    for (size_t i = 0; i < 1000; i++) {
        float a = ref32(1000, 3, i, 0), other = in32(1, i, 0) + in32(2, i, 0) + in32(0, i, 0);
        differ32 += memcmp(&a, &other, sizeof a) != 0;
        differ16 += vkg_th_sc_reference(0, 3, i, 0, 0) != vkg_th_sc_reference(0, 3, i, 0, 1);
    }
    fprintf(stderr,
            "  of 1000 elements: %d fp32 sums change with the ring's start, %d bf16 sums "
            "with the rounding\n",
            differ32, differ16);
    assert_true(differ32 > 10);
    assert_true(differ16 > 10);
}

static int refusals(vkg_th_rank *r, void *arg)
{
    (void)arg;
    int ranks[2] = {1, 0}, bad = 0;
    vkg_group_t *g = NULL;
    if (vkg_group_create(r->comm, ranks, 2, 9, &g) != VKG_OK)
        return 1;
    uint16_t h[8] = {0};
    size_t short_b[3] = {0, 3, 7}, down[3] = {0, 5, 4};
    vkg_status st = vkg_group_allreduce(g, h, 8, VKG_COMM_F16);
    bad += st != VKG_ERR_INVALID_ARG || !strstr(vkg_error_message(), "dtype 2");
    st = vkg_group_reduce_scatter(g, h, 8, short_b, VKG_COMM_BF16);
    bad += st != VKG_ERR_INVALID_ARG || !strstr(vkg_error_message(), "not from 0 to 8");
    st = vkg_group_allgatherv(g, h, 4, down, VKG_COMM_BF16);
    bad += st != VKG_ERR_INVALID_ARG || !strstr(vkg_error_message(), "decrease");
    vkg_comm_codec nopack = {.bytes = cut_bytes, .unpack_add = cut_unpack_add};
    float y[2] = {1.0f, 2.0f};
    st = vkg_group_allreduce_codec(g, y, 2, &nopack);
    bad += st != VKG_ERR_INVALID_ARG || !strstr(vkg_error_message(), "codec");
    float x = (float)r->rank + 1.0f; /* still usable */
    st = vkg_group_allreduce(g, &x, 1, VKG_COMM_F32);
    bad += st != VKG_OK || x != 3.0f;
    if (bad)
        vkg_th_report(r, "bad=%d last: %s", bad, vkg_error_message());
    vkg_group_destroy(&g);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_bites),    cmocka_unit_test(test_messages_threads),
        cmocka_unit_test(test_messages_processes), cmocka_unit_test(test_segment),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
