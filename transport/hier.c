/* Allreduce over several hosts in two levels, used when the communicator spans H hosts, some of
 * them holding 2 or more ranks (c->hier; the host's segment holds its own ranks). The hosts may
 * hold different numbers of ranks: the inter-host level runs in c->lanes lanes, the fewest ranks
 * any host holds (3 + 1 ranks: 1 lane; 4 + 4: 4).
 *
 *   1. reduce-scatter in the segment: the buffer is cut into lanes slices (vkg__chunk_start(count,
 *      i, lanes)); streamed in steps of one chunk, every local rank copies its input in and local
 *      rank i < lanes sums slice i over all of the host's ranks, in local rank order, in fp32
 *      (16-bit values widened); local ranks from lanes on own no slice;
 *   2. between the hosts: local rank i < lanes of every host runs the ZeroMQ ring over its fp32
 *      slice with local rank i of the other hosts (vkg__ring_allreduce_among, hosts in order of
 *      their first rank), so `lanes` links of a host carry data at once, each 1/lanes of it;
 *   3. rounding (16-bit: once; average: the fp32 sum divided by the world size once), then an
 *      allgather of the slices in the segment (empty ones for ranks without a lane).
 *
 * Order of additions, the same on every rank and every run: element e of slice i, in ring chunk
 * k of that slice (vkg__chunk_start(slice length, k, H)), is ((P_k + P_k+1) + ...) + P_k-1, the
 * hosts' partial sums around the ring from host k, where P_h = ((x_h0 + x_h1) + ...) + x_h(L_h-1)
 * over host h's L_h ranks in rank order (a host of one rank: P_h = its input). The flat path adds
 * all ranks in one sequence, so the two agree only where the order cannot show (integer values,
 * 2 ranks) or is the same (3 + 1 with ranks 0-2 on the first host). Every element's final value is
 * computed by one rank of the slice ring and copied by the others, so every rank holds the same
 * bits.
 *
 * Faults: the segment's waits look at the ZeroMQ side (dead, frozen, aborting peers, deadline);
 * the ring waits as every ZeroMQ collective does; a rank that fails sets its segment's abort word,
 * so its host's ranks learn it at once. Not here: broadcast and allgather (hier_copy.c), setup
 * (shm_setup.c). */
#include "shm.h"

#include <stdlib.h>
#include <string.h>

typedef struct hier {
    vkg_shm_op o;
    const uint8_t *send;
    uint8_t *recv;
    size_t count, es, per; /* elements; bytes each; elements per segment step */
    vkg_comm_dtype dt;
    size_t lo, hi; /* this rank's slice [lo, hi) */
    float *part;   /* (hi - lo) fp32: the host's, then the job's sums of the slice */
} hier;

static size_t steps_of(const hier *h)
{
    return (h->count + h->per - 1) / h->per;
}

/* Elements [*e0, *e1) of step j. */
static void step_range(const hier *h, size_t j, size_t *e0, size_t *e1)
{
    *e0 = j * h->per;
    *e1 = h->count - *e0 < h->per ? h->count : *e0 + h->per;
}

/* Local rank q's slice starts here: lanes slices, then empty ones at the end. */
static size_t slice_start(const hier *h, int q)
{
    int lanes = h->o.c->lanes;
    return q < lanes ? vkg__chunk_start(h->count, q, lanes) : h->count;
}

static vkg_status rs_copy_in(hier *h, size_t j)
{
    struct vkg_shm *s = h->o.s;
    uint32_t step = h->o.base + (uint32_t)j;
    size_t e0, e1;
    step_range(h, j, &e0, &e1);
    VKG_TRY(vkg__shm_wait_slot(&h->o, step));
    memcpy(vkg__shm_slot(s, s->me, step), h->send + e0 * h->es, (e1 - e0) * h->es);
    vkg__shm_publish(s, VKG_SHM_RED, step + 1);
    vkg__shm_publish(s, VKG_SHM_IN, step + 1);
    return VKG_OK;
}

/* Sum this rank's part of step j over the host's ranks into h->part, then free the slot. */
static vkg_status rs_reduce(hier *h, size_t j)
{
    struct vkg_shm *s = h->o.s;
    uint32_t step = h->o.base + (uint32_t)j;
    size_t e0, e1;
    step_range(h, j, &e0, &e1);
    VKG_TRY(vkg__shm_wait_all(&h->o, VKG_SHM_IN, step + 1));
    size_t a = e0 > h->lo ? e0 : h->lo, b = e1 < h->hi ? e1 : h->hi;
    if (a < b) {
        float *dst = h->part + (a - h->lo);
        size_t n = b - a, off = (a - e0) * h->es;
        for (int q = 0; q < s->n; q++) {
            const uint8_t *x = vkg__shm_slot(s, q, step) + off;
            if (h->dt == VKG_COMM_F32 && q == 0)
                memcpy(dst, x, n * 4);
            else if (h->dt == VKG_COMM_F32)
                vkg__add_f32(dst, (const float *)x, dst, n, 0); /* dst + x: addition commutes */
            else if (q == 0)
                vkg__widen_16(dst, (const uint16_t *)x, n, h->dt);
            else
                vkg__acc_16(dst, (const uint16_t *)x, n, h->dt);
        }
    }
    vkg__shm_publish(s, VKG_SHM_OUT, step + 1);
    return VKG_OK;
}

/* The finished slice, rounded once, into recv. */
static void finish_slice(hier *h, int avg_n)
{
    size_t n = h->hi - h->lo;
    uint8_t *dst = h->recv + h->lo * h->es;
    for (size_t i = 0; i < n; i++) {
        float v = h->part[i];
        if (avg_n > 0)
            v /= (float)avg_n;
        if (h->dt == VKG_COMM_F32)
            memcpy(dst + 4 * i, &v, 4);
        else {
            uint16_t r = h->dt == VKG_COMM_BF16 ? vkg__f32_to_bf16(v) : vkg__f32_to_f16(v);
            memcpy(dst + 2 * i, &r, 2);
        }
    }
}

vkg_status vkg__hier_allreduce(vkg_comm_t *c, const void *send, void *recv, size_t count,
                               vkg_comm_dtype dt, vkg_comm_op op)
{
    hier h = {.send = send, .recv = recv, .count = count, .dt = dt};
    VKG_TRY(vkg__shm_start(&h.o, c, "allreduce"));
    struct vkg_shm *s = c->shm;
    h.es = vkg_comm_dtype_size(dt);
    h.per = s->chunk / h.es;
    h.lo = slice_start(&h, s->me);
    h.hi = slice_start(&h, s->me + 1);
    h.part = malloc((h.hi - h.lo + 1) * sizeof *h.part);
    VKG_CHECK(h.part != NULL, VKG_ERR_NOMEM, "allreduce: out of memory (%zu floats)", h.hi - h.lo);
    size_t steps = steps_of(&h);
    vkg_status st = VKG_OK;
    for (size_t t = 0; t < steps + 1 && st == VKG_OK; t++) { /* 1: reduce-scatter in the host */
        if (t < steps)
            st = rs_copy_in(&h, t);
        if (st == VKG_OK && t >= 1)
            st = rs_reduce(&h, t - 1);
    }
    s->step = h.o.base + (uint32_t)steps;
    /* 2: between the hosts (the members of a lane have slices of one length) */
    if (st == VKG_OK && h.hi > h.lo)
        st = vkg__ring_allreduce_among(c, c->across, c->nhosts, c->across_index, h.part, h.part,
                                       h.hi - h.lo, VKG_COMM_F32, VKG_COMM_SUM);
    if (st == VKG_OK) { /* 3: round, then allgather in the host */
        finish_slice(&h, op == VKG_COMM_AVG ? c->size : 0);
        size_t bounds[VKG_SHM_MAX_RANKS + 1];
        for (int q = 0; q <= s->n; q++)
            bounds[q] = slice_start(&h, q);
        st = vkg__shm_allgatherv(c, "allreduce", recv, count, h.es, bounds);
    }
    free(h.part);
    return st;
}
