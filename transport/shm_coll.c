/* Allreduce, broadcast and allgather in the host's shared-memory segment (see shm.h for its
 * layout), used when every rank of the communicator is on this host (and, through the helpers at
 * the end, by the two-level allreduce of hier.c).
 *
 * Allreduce: reduce-scatter + allgather in place, streamed in steps of one chunk of the buffer.
 * In step g each rank copies its chunk into its region's slot g % slots and raises its `in`
 * counter; each rank then reduces its own slice of the chunk from every rank's slot, in rank
 * order, into its own region, and raises `red` (every core reduces, each byte is copied in once);
 * then every rank copies every slice out and raises `out`, which frees the slot for step g +
 * slots. A rank runs step t's copy-in, step t - 1's reduction and step t - 2's copy-out in turn,
 * so with several steps in flight copying and reducing overlap across ranks; every wait depends
 * only on steps the others finish earlier, so the pipeline cannot deadlock.
 * Order of additions: the ZeroMQ path's for the same communicator and count, so both give the
 * same bits: rank order (its one-step and all-to-all engines), or, from ring_min_ranks ranks on
 * for buffers above small_bytes, the ring's (each ring chunk k summed from rank k onwards).
 * 16-bit values are widened, summed in fp32 and rounded once.
 *
 * Small buffers (one step, up to 64 KiB) take one synchronisation instead of two: every rank
 * reduces the whole buffer from every slot in rank order straight into its result (the same
 * arithmetic on every rank, so the same bits), as the ZeroMQ path's one-step exchange does.
 *
 * Larger allreduces first offer themselves to shm_direct.c, which reads the peers' buffers in
 * place (in their pools in the segment, or with process_vm_readv) when the buffers and the size
 * allow; the pipeline below runs when it declines, with the same order of additions
 * (vkg__shm_reduce_from serves both).
 *
 * Not here: waiting and signalling (shm_wait.c), creating and handing over the segment (shm.c).
 */
#include "shm.h"

#include <string.h>

#define DIRECT_BYTES (64u << 10) /* up to this size every rank reduces the whole buffer */

enum { CTR_IN = VKG_SHM_IN, CTR_RED = VKG_SHM_RED, CTR_OUT = VKG_SHM_OUT };

typedef vkg_shm_op shm_op;

/* ---- allreduce ---- */

typedef vkg_shm_ar ar;

/* Slice q of a step of n elements: ranks take whole 64-byte lines, the last one the rest. */
static size_t slice_start(const ar *a, size_t n, int q)
{
    size_t line = 64 / a->es, nr = (size_t)a->o.s->n;
    size_t each = ((n + nr - 1) / nr + line - 1) / line * line;
    size_t x = each * (size_t)q;
    return x < n ? x : n;
}

void vkg__shm_slice(const vkg_shm_ar *a, size_t n, int q, size_t *lo, size_t *hi)
{
    *lo = slice_start(a, n, q);
    *hi = q == a->o.s->n - 1 ? n : slice_start(a, n, q + 1);
}

static size_t step_len(const ar *a, size_t j)
{
    size_t e0 = j * a->per;
    return a->count - e0 < a->per ? a->count - e0 : a->per;
}

/* The ring chunk holding element e of the whole buffer. */
static int ring_chunk(const ar *a, size_t e)
{
    int n = a->o.s->n, k = (int)((double)e * n / (double)a->count);
    k = k < 0 ? 0 : k >= n ? n - 1 : k;
    while (k > 0 && a->rb[k] > e)
        k--;
    while (k < n - 1 && a->rb[k + 1] <= e)
        k++;
    return k;
}

void vkg__shm_reduce_from(const vkg_shm_ar *a, const uint8_t *const *from, size_t e, size_t len,
                          uint8_t *dst)
{
    int n = a->o.s->n;
    const void *srcs[VKG_SHM_MAX_RANKS];
    for (size_t done = 0; done < len;) {
        size_t take = len - done;
        int first = 0;
        if (a->ring) { /* the ring starts chunk k at rank k: split at its chunk boundaries */
            first = ring_chunk(a, e + done);
            size_t end = a->rb[first + 1];
            take = end - (e + done) < take ? end - (e + done) : take;
        }
        for (int i = 0; i < n; i++)
            srcs[i] = from[(first + i) % n] + done * a->es;
        vkg__reduce_ordered(dst + done * a->es, srcs, n, take, a->dt, a->avg);
        done += take;
    }
}

/* Reduce len elements at element e of the whole buffer (offset off within the step's slots)
 * from every rank's slot into dst (this rank's slot, or the caller's buffer at element e). */
static void reduce_run(ar *a, uint32_t step, size_t off, size_t e, size_t len, uint8_t *dst)
{
    const uint8_t *from[VKG_SHM_MAX_RANKS];
    for (int q = 0; q < a->o.s->n; q++)
        from[q] = vkg__shm_slot(a->o.s, q, step) + off * a->es;
    vkg__shm_reduce_from(a, from, e, len, dst);
}

static vkg_status ar_copy_in(ar *a, size_t j)
{
    uint32_t step = a->o.base + (uint32_t)j;
    VKG_TRY(vkg__shm_wait_slot(&a->o, step));
    memcpy(vkg__shm_slot(a->o.s, a->o.s->me, step), a->send + j * a->per * a->es,
           step_len(a, j) * a->es);
    vkg__shm_publish(a->o.s, CTR_IN, step + 1);
    return VKG_OK;
}

static vkg_status ar_reduce(ar *a, size_t j)
{
    uint32_t step = a->o.base + (uint32_t)j;
    VKG_TRY(vkg__shm_wait_all(&a->o, CTR_IN, step + 1));
    size_t n = step_len(a, j), lo = slice_start(a, n, a->o.s->me);
    size_t hi = slice_start(a, n, a->o.s->me + 1);
    if (a->o.s->me == a->o.s->n - 1)
        hi = n;
    if (hi > lo)
        reduce_run(a, step, lo, j * a->per + lo, hi - lo,
                   vkg__shm_slot(a->o.s, a->o.s->me, step) + lo * a->es);
    vkg__shm_publish(a->o.s, CTR_RED, step + 1);
    return VKG_OK;
}

static vkg_status ar_copy_out(ar *a, size_t j)
{
    struct vkg_shm *s = a->o.s;
    uint32_t step = a->o.base + (uint32_t)j;
    VKG_TRY(vkg__shm_wait_all(&a->o, CTR_RED, step + 1));
    size_t n = step_len(a, j);
    uint8_t *dst = a->recv + j * a->per * a->es;
    for (int q = 0; q < s->n; q++) {
        size_t lo = slice_start(a, n, q), hi = q == s->n - 1 ? n : slice_start(a, n, q + 1);
        if (hi > lo)
            memcpy(dst + lo * a->es, vkg__shm_slot(s, q, step) + lo * a->es, (hi - lo) * a->es);
    }
    vkg__shm_publish(s, CTR_OUT, step + 1);
    return VKG_OK;
}

/* One step, every rank reducing everything: copy in, wait for every input, reduce. */
static vkg_status ar_direct(ar *a)
{
    struct vkg_shm *s = a->o.s;
    uint32_t step = a->o.base;
    VKG_TRY(vkg__shm_wait_slot(&a->o, step));
    memcpy(vkg__shm_slot(s, s->me, step), a->send, a->count * a->es);
    vkg__shm_publish(s, CTR_RED, step + 1);
    vkg__shm_publish(s, CTR_IN, step + 1);
    VKG_TRY(vkg__shm_wait_all(&a->o, CTR_IN, step + 1));
    const void *srcs[VKG_SHM_MAX_RANKS];
    for (int q = 0; q < s->n; q++)
        srcs[q] = vkg__shm_slot(s, q, step);
    vkg__reduce_ordered(a->recv, srcs, s->n, a->count, a->dt, a->avg);
    vkg__shm_publish(s, CTR_OUT, step + 1);
    return VKG_OK;
}

/* The allreduce of a (started, its fields set) in its segment. */
static vkg_status ar_run(ar *a_)
{
    ar a = *a_;
    size_t count = a.count, steps = (count + a.per - 1) / a.per;
    vkg_status st = VKG_OK;
    if (steps == 1 && count * a.es <= DIRECT_BYTES && !a.ring) {
        st = ar_direct(&a);
        steps = 0;
    }
    for (size_t t = 0; t < steps + 2 && st == VKG_OK; t++) {
        if (t < steps)
            st = ar_copy_in(&a, t);
        if (st == VKG_OK && t >= 1 && t - 1 < steps)
            st = ar_reduce(&a, t - 1);
        if (st == VKG_OK && t >= 2)
            st = ar_copy_out(&a, t - 2);
    }
    a.o.s->step = a.o.base + (uint32_t)(steps ? steps : 1);
    return st;
}

/* The ring's chunks of count elements over n ranks (vkg__chunk_start). */
static void ring_bounds(size_t count, int n, size_t *rb)
{
    for (int k = 0; k <= n; k++)
        rb[k] = vkg__chunk_start(count, k, n);
}

vkg_status vkg__shm_allreduce(vkg_comm_t *c, const void *send, void *recv, size_t count,
                              vkg_comm_dtype dt, vkg_comm_op op)
{
    ar a = {.send = send, .recv = recv, .count = count, .dt = dt, .avg = op == VKG_COMM_AVG};
    VKG_TRY(vkg__shm_start(&a.o, c, "allreduce"));
    a.es = vkg_comm_dtype_size(dt);
    a.per = c->shm->chunk / a.es;
    a.ring = c->size > 2 && c->size >= c->ring_min_ranks && count * a.es > c->small_bytes;
    size_t rb[VKG_SHM_MAX_RANKS + 1];
    ring_bounds(count, c->size, rb);
    a.rb = rb;
    if (count * a.es > DIRECT_BYTES) { /* the direct paths, when the buffers and size allow */
        int done = 0;
        VKG_TRY(vkg__shm_direct_allreduce(&a, &done));
        if (done)
            return VKG_OK;
    }
    c->shm->engine[VKG_SHM_ENG_SEGMENT]++;
    return ar_run(&a);
}

vkg_status vkg__shm_group_allreduce(vkg_comm_t *c, struct vkg_shm *s, const int *ranks,
                                    const char *what, float *buf, size_t count, const size_t *rb)
{
    ar a = {.send = (uint8_t *)buf,
            .recv = (uint8_t *)buf,
            .count = count,
            .es = 4,
            .dt = VKG_COMM_F32,
            .ring = 1,
            .rb = rb};
    VKG_TRY(vkg__shm_start_on(&a.o, c, s, ranks, what));
    a.per = s->chunk / 4;
    return ar_run(&a);
}

/* ---- ZeRO's reduce-scatter and allgatherv over chunks [bounds[q], bounds[q + 1]) ---- */

/* Reduce this rank's chunk within step j straight into the buffer, then free the slot. */
static vkg_status rs_reduce(ar *a, size_t j, size_t lo, size_t hi)
{
    uint32_t step = a->o.base + (uint32_t)j;
    VKG_TRY(vkg__shm_wait_all(&a->o, CTR_IN, step + 1));
    size_t e0 = j * a->per, e1 = e0 + step_len(a, j);
    size_t x = e0 > lo ? e0 : lo, y = e1 < hi ? e1 : hi;
    if (x < y)
        reduce_run(a, step, x - e0, x, y - x, a->recv + x * a->es);
    vkg__shm_publish(a->o.s, CTR_RED, step + 1);
    vkg__shm_publish(a->o.s, CTR_OUT, step + 1);
    return VKG_OK;
}

vkg_status vkg__shm_reduce_scatter(vkg_comm_t *c, void *buf, size_t count, const size_t *bounds,
                                   vkg_comm_dtype dt, int ring)
{
    size_t rb[VKG_SHM_MAX_RANKS + 1];
    ring_bounds(count, c->size, rb);
    ar a = {.rb = rb,
            .send = (uint8_t *)buf,
            .recv = (uint8_t *)buf,
            .count = count,
            .es = vkg_comm_dtype_size(dt),
            .dt = dt,
            .ring = ring && c->size > 2};
    VKG_TRY(vkg__shm_start(&a.o, c, "reduce-scatter"));
    a.per = c->shm->chunk / a.es;
    int done = 0;
    if (count * a.es > DIRECT_BYTES) /* in the pools, when every rank's buffer is in its own */
        VKG_TRY(vkg__shm_direct_zero(&a, bounds, 1, &done));
    if (done)
        return VKG_OK;
    size_t steps = (count + a.per - 1) / a.per, lo = bounds[c->shm->me],
           hi = bounds[c->shm->me + 1];
    vkg_status st = VKG_OK;
    for (size_t t = 0; t < steps + 1 && st == VKG_OK; t++) {
        if (t < steps)
            st = ar_copy_in(&a, t);
        if (st == VKG_OK && t >= 1)
            st = rs_reduce(&a, t - 1, lo, hi);
    }
    c->shm->step = a.o.base + (uint32_t)steps;
    return st;
}

vkg_status vkg__shm_allgatherv(vkg_comm_t *c, const char *name, void *buf, size_t count, size_t es,
                               const size_t *bounds)
{
    ar a = {.send = buf, .recv = buf, .count = count, .es = es};
    VKG_TRY(vkg__shm_start(&a.o, c, name));
    int done = 0;
    if (count * es > DIRECT_BYTES) /* in the pools, when every rank's buffer is in its own */
        VKG_TRY(vkg__shm_direct_zero(&a, bounds, 0, &done));
    if (done)
        return VKG_OK;
    shm_op o = a.o;
    struct vkg_shm *s = c->shm;
    uint8_t *b = buf;
    size_t per = s->chunk / es, steps = (count + per - 1) / per;
    vkg_status st = VKG_OK;
    for (size_t j = 0; j < steps && st == VKG_OK; j++) {
        uint32_t step = o.base + (uint32_t)j;
        size_t e0 = j * per, e1 = count - e0 < per ? count : e0 + per;
        st = vkg__shm_wait_slot(&o, step);
        if (st < 0)
            break;
        size_t x = e0 > bounds[s->me] ? e0 : bounds[s->me];
        size_t y = e1 < bounds[s->me + 1] ? e1 : bounds[s->me + 1];
        if (x < y)
            memcpy(vkg__shm_slot(s, s->me, step) + (x - e0) * es, b + x * es, (y - x) * es);
        vkg__shm_publish(s, CTR_IN, step + 1);
        vkg__shm_publish(s, CTR_RED, step + 1);
        st = vkg__shm_wait_all(&o, CTR_IN, step + 1);
        if (st < 0)
            break;
        for (int q = 0; q < s->n; q++) {
            x = e0 > bounds[q] ? e0 : bounds[q];
            y = e1 < bounds[q + 1] ? e1 : bounds[q + 1];
            if (q != s->me && x < y)
                memcpy(b + x * es, vkg__shm_slot(s, q, step) + (x - e0) * es, (y - x) * es);
        }
        vkg__shm_publish(s, CTR_OUT, step + 1);
    }
    s->step = o.base + (uint32_t)steps;
    return st;
}

/* ---- broadcast and allgather: copy in, then out ---- */

static vkg_status bcast_run(shm_op *op, void *buf, size_t bytes, int root)
{
    shm_op o = *op;
    struct vkg_shm *s = o.s;
    size_t steps = (bytes + s->chunk - 1) / s->chunk;
    vkg_status st = VKG_OK;
    for (size_t j = 0; j < steps && st == VKG_OK; j++) {
        uint32_t step = o.base + (uint32_t)j;
        size_t off = j * s->chunk, n = bytes - off < s->chunk ? bytes - off : s->chunk;
        if (s->me == root) {
            st = vkg__shm_wait_slot(&o, step);
            if (st < 0)
                break;
            memcpy(vkg__shm_slot(s, root, step), (uint8_t *)buf + off, n);
        }
        vkg__shm_publish(s, CTR_IN, step + 1);
        vkg__shm_publish(s, CTR_RED, step + 1);
        if (s->me != root) {
            st = vkg__shm_wait_one(&o, root, CTR_IN, step + 1);
            if (st < 0)
                break;
            memcpy((uint8_t *)buf + off, vkg__shm_slot(s, root, step), n);
        }
        vkg__shm_publish(s, CTR_OUT, step + 1);
    }
    s->step = o.base + (uint32_t)steps;
    return st;
}

static vkg_status gather_run(shm_op *op, const void *send, size_t bytes, void *recv)
{
    shm_op o = *op;
    struct vkg_shm *s = o.s;
    size_t steps = (bytes + s->chunk - 1) / s->chunk;
    uint8_t *out = recv;
    vkg_status st = VKG_OK;
    for (size_t j = 0; j < steps && st == VKG_OK; j++) {
        uint32_t step = o.base + (uint32_t)j;
        size_t off = j * s->chunk, n = bytes - off < s->chunk ? bytes - off : s->chunk;
        st = vkg__shm_wait_slot(&o, step);
        if (st < 0)
            break;
        memcpy(vkg__shm_slot(s, s->me, step), (const uint8_t *)send + off, n);
        vkg__shm_publish(s, CTR_IN, step + 1);
        vkg__shm_publish(s, CTR_RED, step + 1);
        st = vkg__shm_wait_all(&o, CTR_IN, step + 1);
        if (st < 0)
            break;
        for (int q = 0; q < s->n; q++)
            memmove(out + (size_t)q * bytes + off, vkg__shm_slot(s, q, step), n);
        vkg__shm_publish(s, CTR_OUT, step + 1);
    }
    s->step = o.base + (uint32_t)steps;
    return st;
}

vkg_status vkg__shm_broadcast(vkg_comm_t *c, void *buf, size_t bytes, int root)
{
    shm_op o;
    VKG_TRY(vkg__shm_start(&o, c, "broadcast"));
    return bcast_run(&o, buf, bytes, root);
}

vkg_status vkg__shm_allgather(vkg_comm_t *c, const void *send, size_t bytes, void *recv)
{
    shm_op o;
    VKG_TRY(vkg__shm_start(&o, c, "allgather"));
    return gather_run(&o, send, bytes, recv);
}

vkg_status vkg__shm_group_broadcast(vkg_comm_t *c, struct vkg_shm *s, const int *ranks,
                                    const char *what, void *buf, size_t bytes, int root)
{
    shm_op o;
    VKG_TRY(vkg__shm_start_on(&o, c, s, ranks, what));
    return bcast_run(&o, buf, bytes, root);
}

vkg_status vkg__shm_group_allgather(vkg_comm_t *c, struct vkg_shm *s, const int *ranks,
                                    const char *what, const void *send, size_t bytes, void *recv)
{
    shm_op o;
    VKG_TRY(vkg__shm_start_on(&o, c, s, ranks, what));
    return gather_run(&o, send, bytes, recv);
}
