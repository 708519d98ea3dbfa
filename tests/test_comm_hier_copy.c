/* Broadcast and allgather across hosts in two levels (transport/hier_copy.c), with hosts faked by
 * the test-only host tag (forked processes over ipc): 2 hosts x 2 ranks, 2 x 2 interleaved (ranks
 * 0 and 2 on one host, 1 and 3 on the other: the allgather's host blocks are not in rank order),
 * 3 + 1, 2 + 1 and three hosts of 2, 2 and 1 ranks, interleaved. For sizes from 1 byte to 300007
 * (many segment steps and ring segments), a broadcast from every root and an allgather, in place
 * and not: every byte equal to what the root or each rank sent (what the flat path gives: no
 * arithmetic is involved), 0 wrong on every rank, every rank's results bitwise equal (one digest),
 * and every call run through the host's segment (its step counter moved), so the two-level path was
 * taken. Faults, on 3 + 1 during 16 MiB broadcasts and allgathers: a rank killed (SIGKILL) or
 * frozen (SIGSTOP) is named by every other rank within twice the timeout. */
#include <setjmp.h>
#include <signal.h>
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

static const size_t sizes[] = {1, 3, 1000, 70001, 300007};
#define NSIZES 5

/* Byte i of what rank r sends in call k. */
static uint8_t byte_of(int r, size_t i, int k)
{
    return (uint8_t)(vkg_th_mix((uint32_t)i * 131u + (uint32_t)r * 7u + (uint32_t)k) >> 8);
}

static void fill(uint8_t *p, size_t n, int r, int k)
{
    for (size_t i = 0; i < n; i++)
        p[i] = byte_of(r, i, k);
}

/* Bytes of p (n of them) that differ from rank r's in call k. */
static size_t wrong_bytes(const uint8_t *p, size_t n, int r, int k)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += p[i] != byte_of(r, i, k);
    return bad;
}

/* Every broadcast and allgather; reports "wrong=<n> digest=<hex>" then details. */
static int copy_body(vkg_th_rank *r, void *arg)
{
    const char *path = arg;
    int n = r->size, k = 0, off_segment = 0;
    size_t wrong = 0;
    uint64_t digest = 0;
    vkg_status st = VKG_OK;
    if (strncmp(vkg_comm_path(r->comm), path, strlen(path)) != 0) {
        vkg_th_report(r, "path \"%s\", expected \"%s...\"", vkg_comm_path(r->comm), path);
        return 1;
    }
    for (int si = 0; si < NSIZES && st == VKG_OK; si++) {
        size_t bytes = sizes[si];
        uint8_t *buf = malloc(bytes * (size_t)n), *mine = malloc(bytes);
        for (int root = 0; root < n && st == VKG_OK; root++, k++) {
            if (r->rank == root)
                fill(buf, bytes, root, k);
            else
                memset(buf, 0xA5, bytes);
            uint32_t steps = vkg__comm_shm_steps(r->comm);
            st = vkg_comm_broadcast(r->comm, buf, bytes, root);
            off_segment += vkg__comm_shm_steps(r->comm) == steps;
            wrong += st == VKG_OK ? wrong_bytes(buf, bytes, root, k) : 0;
            digest = digest * 1099511628211ull ^ vkg_th_digest(buf, bytes);
        }
        for (int inplace = 0; inplace <= 1 && st == VKG_OK; inplace++, k++) {
            memset(buf, 0x5A, bytes * (size_t)n);
            uint8_t *send = inplace ? buf + (size_t)r->rank * bytes : mine;
            fill(send, bytes, r->rank, k);
            uint32_t steps = vkg__comm_shm_steps(r->comm);
            st = vkg_comm_allgather(r->comm, send, bytes, buf);
            off_segment += vkg__comm_shm_steps(r->comm) == steps;
            for (int q = 0; q < n && st == VKG_OK; q++)
                wrong += wrong_bytes(buf + (size_t)q * bytes, bytes, q, k);
            digest = digest * 1099511628211ull ^ vkg_th_digest(buf, bytes * (size_t)n);
        }
        free(buf);
        free(mine);
    }
    vkg_th_report(r, "wrong=%zu digest=%016llx st=%s %s; %d calls outside the segment", wrong,
                  (unsigned long long)digest, vkg_status_name(st), st ? vkg_error_message() : "",
                  off_segment);
    return st != VKG_OK || wrong != 0 || off_segment != 0;
}

/* Run the sweep on the layout `hosts` (one character per rank); every rank must succeed with
 * one digest. */
static void run_layout(const char *hosts, const char *path)
{
    int n = (int)strlen(hosts);
    vkg_th_opts o = {.transport = VKG_COMM_IPC,
                     .processes = 1,
                     .timeout_ms = 20000,
                     .shm_chunk_bytes = 64u << 10, /* many steps per call */
                     .segment_bytes = 64u << 10,   /* many ring segments between hosts */
                     .hosts = hosts,
                     .wall_s = 120};
    vkg_th_result res[VKG_TH_MAX_RANKS];
    vkg_th_run(n, &o, copy_body, (void *)path, res);
    assert_true(vkg_th_agree(res, n, 31)); /* wrong=0 digest=<16 hex> */
    fprintf(stderr, "  %s: %s\n", hosts, res[0].report);
}

static void test_two_hosts(void **state)
{
    (void)state;
    run_layout("aabb", "hier (2 hosts x 2 ranks");
}

static void test_two_hosts_interleaved(void **state)
{
    (void)state;
    run_layout("abab", "hier (2 hosts x 2 ranks");
}

static void test_unequal_hosts(void **state)
{
    (void)state;
    run_layout("aaab", "hier (2 hosts of 1 to 3 ranks");
    run_layout("aab", "hier (2 hosts of 1 to 2 ranks");
    run_layout("abbca", "hier (3 hosts of 1 to 2 ranks"); /* a chain through a middle host */
}

/* ---- faults ---- */

#define FAULT_TIMEOUT_MS 1500
#define FAULT_BYTES (4u << 20) /* per rank: many segment steps and ring segments */

/* Broadcasts from every root in turn and allgathers, until one fails. */
static int loop_until_error(vkg_th_rank *r, void *arg)
{
    (void)arg;
    uint8_t *buf = calloc((size_t)r->size, FAULT_BYTES);
    uint8_t *mine = buf + (size_t)r->rank * FAULT_BYTES;
    vkg_status st = vkg_comm_allgather(r->comm, mine, FAULT_BYTES, buf);
    if (strncmp(vkg_comm_path(r->comm), "hier", 4) != 0)
        st = VKG_ERR_STATE;
    vkg_th_ready(r);
    for (long it = 0; st == VKG_OK && it < 1000000; it++) {
        st = vkg_comm_broadcast(r->comm, buf, (size_t)r->size * FAULT_BYTES, (int)(it % r->size));
        if (st == VKG_OK)
            st = vkg_comm_allgather(r->comm, mine, FAULT_BYTES, buf);
    }
    vkg_th_report(r, "%s: %s", vkg_status_name(st), vkg_error_message());
    free(buf);
    return st == VKG_OK ? 0 : 1;
}

/* On hosts of 3 and 1 ranks: the lone rank of a host killed, and a rank that is no host's first
 * (it never runs the ZeroMQ level) frozen, named by every other rank within twice the timeout. */
static void test_faults(void **state)
{
    (void)state;
    vkg_th_opts o = {.transport = VKG_COMM_IPC,
                     .processes = 1,
                     .timeout_ms = FAULT_TIMEOUT_MS,
                     .hosts = "aaab",
                     .wall_s = 30};
    double bound = 2.0 * FAULT_TIMEOUT_MS / 1000.0;
    assert_true(vkg_th_fault(4, &o, loop_until_error, NULL, 3, SIGKILL, bound, "hosts aaab"));
    assert_true(vkg_th_fault(4, &o, loop_until_error, NULL, 1, SIGSTOP, bound, "hosts aaab"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_hosts),
        cmocka_unit_test(test_two_hosts_interleaved),
        cmocka_unit_test(test_unequal_hosts),
        cmocka_unit_test(test_faults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
