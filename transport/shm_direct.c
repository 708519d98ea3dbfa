/* The direct allreduce of the host's segment: every rank reads its peers' buffers where they
 * are, instead of copying each buffer into the segment's slots and the result back out
 * (shm_coll.c). Two ways to reach a peer's buffer, chosen per peer and per buffer:
 *   - in-pool: the buffer lies in the peer's pool in the segment (vkg_comm_buffer_alloc,
 *     shm_pool.c): read it through this rank's own mapping, no copy at all;
 *   - single-copy (cross-memory attach): anywhere else in the peer's memory: read it with
 *     process_vm_readv, one copy by the kernel, in pieces of up to 256 KiB per peer into
 *     scratch that stays in the cache, then reduced from there.
 *
 * One segment step g per allreduce. Each rank writes its send and recv buffer (an offset in its
 * pool, or its address) into its vkg_shm_ctl and raises `in` = g + 1; once every `in` is there,
 * rank q reduces its slice q of the result (whole 64-byte lines, vkg__shm_slice) from every
 * rank's send buffer, in the order of additions of the segment path and the ZeroMQ path (rank
 * order, or around the ring from each element's ring chunk: vkg__shm_reduce_from), straight
 * into its own recv buffer, and raises `red`; once every `red` is there it copies every other
 * rank's slice from that rank's recv buffer into its own and raises `out`; it returns only once
 * every `out` is there, so no peer still reads its buffers when the caller reuses them. Every
 * element is computed once, by its slice's rank, and copied by the others: the same bits on
 * every rank, and the bits of the other paths. Memory traffic per rank at N = 2 (out of cache):
 * read the peer's half, read the own half, write the half, read the peer's result half, write
 * it: about 2.5x the buffer, against 5.5x through the slots (single-copy: the two reads of the
 * peer are the kernel's copies, at about half memcpy's speed on the 2-core VM).
 *
 * When it runs: from the single-copy threshold on (256 KiB, VKG_COMM_CMA_MIN) when single-copy
 * is on, for any buffer; above 64 KiB when the segment has pools, if every rank's buffers turn
 * out to be in its pool. Each rank sees every rank's buffers only after the `in` round, so the
 * choice is made there, from what every rank published: the same on every rank. When a peer's
 * buffer is outside its pool and single-copy cannot be used, step g carried nothing: every rank
 * raises `red` and `out` for it and runs the segment path from g + 1. A rank that knows this
 * from its own buffers raises all three at once and goes on without waiting.
 *
 * Single-copy needs the kernel to let ranks read each other (same user; Yama ptrace_scope 0; no
 * seccomp filter or PID namespace in the way). Setup probes it: every rank publishes its pid and
 * the address and value of a random canary word, every rank reads every peer's canary with
 * process_vm_readv, and the verdicts are agreed (any failure turns it off everywhere, the path
 * saying which rank failed and why). It is off unless VKG_COMM_CMA=1: on the 2-core VM it was
 * slower than the slots at every size (docs/BENCHMARKS.md), process_vm_readv copying at about
 * half memcpy's speed; a host where it pays turns it on. PR_SET_PTRACER is not used:
 * it would let any process of the user read the trainer's memory, to gain a bandwidth the
 * segment path approaches anyway.
 *
 * ZeRO's reduce-scatter and allgatherv (in place, chunks of the caller's choosing) take the same
 * step above 64 KiB when every rank's buffer is in its pool: the owner of each chunk reduces it
 * straight from the peers' pools, or each rank copies the others' chunks from theirs. Not with
 * process_vm_readv (measured slower than the slots on the 2-core host), nor broadcast and
 * allgather (their buffers are the caller's, seldom in the pools).
 *
 * Faults: every wait is the segment's (deadlines, aborts, dead and frozen peers); a read that
 * fails (the peer died: ESRCH; unmapped its buffer: EFAULT) is an error naming the rank.
 * Not here: the segment path (shm_coll.c), the pool allocator (shm_pool.c).
 */
#include "shm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "os/file.h"
#include "os/shm.h"

/* Read per peer into scratch before reducing: 256 KiB (a process_vm_readv of 64 KiB costs
 * about 1.5x per byte what one of 256 KiB does, measured on 2 cores), less from 5 peers on so
 * that the scratch of all peers stays within 1 MiB (in the L2 or L3 cache). */
#define PIECE_MAX (256u << 10)
#define SCRATCH_MAX (1u << 20)
#define PIECE_MIN (64u << 10)

static size_t piece_bytes(int n)
{
    size_t p = SCRATCH_MAX / (size_t)(n > 1 ? n - 1 : 1) / 4096 * 4096;
    return p > PIECE_MAX ? PIECE_MAX : p < PIECE_MIN ? PIECE_MIN : p;
}

enum { CTR_IN = VKG_SHM_IN, CTR_RED = VKG_SHM_RED, CTR_OUT = VKG_SHM_OUT };

/* ---- setup: does process_vm_readv work to every peer? ---- */

typedef struct probe_info {
    int32_t pid;
    uint32_t pad;
    uint64_t addr, value; /* the canary word: where it is in this rank, what it holds */
    uint64_t cma_min;     /* this rank's VKG_COMM_CMA_MIN (rank 0's is used) */
} probe_info;

typedef struct probe_verdict {
    uint8_t ok, bad_env;
    char why[126];
} probe_verdict;

/* Read bytes at addr in local rank q's memory into dst; VKG_OK or the errno of the failure. */
static int cma_read(const struct vkg_shm *s, int q, void *dst, uint64_t addr, size_t bytes)
{
    return vkg_os_process_read((long)s->pid[q], dst, addr, bytes);
}

/* This rank's VKG_COMM_CMA_MIN in *min (default VKG_SHM_CMA_MIN_BYTES, comm_testing.h); 0 when
 * it is bad. Every rank must take the same path, so the host's first rank's value is used by
 * all (agreed at setup). See docs/DESIGN-NOTES.md for what was measured. */
static int cma_min_setting(uint64_t *min)
{
    const char *env = getenv("VKG_COMM_CMA_MIN");
    int neg = 0;
    *min = VKG_SHM_CMA_MIN_BYTES;
    return !env || (vkg_parse_whole(env, &neg, min) && !neg);
}

/* This rank's verdict on reading every peer, given their probe infos. */
static void probe_peers(struct vkg_shm *s, const vkg_comm_t *c, const probe_info *all,
                        probe_verdict *v)
{
    const char *env = getenv("VKG_COMM_CMA");
    uint64_t min;
    v->ok = 1;
    if (!cma_min_setting(&min)) {
        v->ok = 0;
        v->bad_env = 1;
        snprintf(v->why, sizeof v->why, "VKG_COMM_CMA_MIN='%.40s' on rank %d is not a size",
                 getenv("VKG_COMM_CMA_MIN"), c->rank);
        return;
    }
    if (env && strcmp(env, "0") != 0 && strcmp(env, "1") != 0) {
        v->ok = 0;
        v->bad_env = 1;
        snprintf(v->why, sizeof v->why, "VKG_COMM_CMA='%.40s' on rank %d is not 0 or 1", env,
                 c->rank);
        return;
    }
    if (!env) {
        v->ok = 0;
        snprintf(v->why, sizeof v->why, "not asked for (VKG_COMM_CMA=1)");
        return;
    }
    if (!strcmp(env, "0")) {
        v->ok = 0;
        snprintf(v->why, sizeof v->why, "VKG_COMM_CMA=0 on rank %d", c->rank);
        return;
    }
    for (int q = 0; q < s->n && v->ok; q++) {
        uint64_t got = 0;
        if (q == s->me)
            continue;
        int e = cma_read(s, q, &got, all[q].addr, sizeof got);
        if (e)
            snprintf(v->why, sizeof v->why, "process_vm_readv of rank %d: %s", c->local[q],
                     strerror(e));
        else if (got != all[q].value)
            snprintf(v->why, sizeof v->why,
                     "process_vm_readv of rank %d read another process (PID namespaces differ?)",
                     c->local[q]);
        v->ok = !e && got == all[q].value;
    }
}

vkg_status vkg__shm_direct_setup(vkg_comm_t *c)
{
    struct vkg_shm *s = c->shm;
    int n = s->n;
    s->canary = malloc(sizeof *s->canary);
    probe_info mine = {.pid = (int32_t)vkg_os_pid()}, *all = calloc((size_t)n, sizeof *all);
    probe_verdict v = {0}, *vs = calloc((size_t)n, sizeof *vs);
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, s->canary && all && vs, VKG_ERR_NOMEM, out, "out of memory");
    VKG_TRY_GOTO(st, vkg__crypto_random(s->canary, sizeof *s->canary), out);
    mine.addr = (uint64_t)(uintptr_t)s->canary;
    mine.value = *s->canary;
    (void)cma_min_setting(&mine.cma_min); /* a bad value fails the verdict below */
    VKG_TRY_GOTO(st, vkg_comm_allgather(c, &mine, sizeof mine, all), out);
    for (int q = 0; q < n; q++)
        s->pid[q] = all[q].pid;
    s->ctl[s->me].pid = mine.pid;
    probe_peers(s, c, all, &v);
    /* the second round is also the barrier after which nobody reads the canaries again */
    VKG_TRY_GOTO(st, vkg_comm_allgather(c, &v, sizeof v, vs), out);
    int bad = -1;
    for (int q = 0; q < n && bad < 0; q++)
        bad = vs[q].ok ? -1 : q;
    for (int q = 0; q < n; q++)
        VKG_CHECK_GOTO(st, !vs[q].bad_env, VKG_ERR_INVALID_ARG, out, "%.126s", vs[q].why);
    if (bad < 0)
        s->scratch = malloc((size_t)(n - 1) * piece_bytes(n));
    s->cma = bad < 0 && s->scratch != NULL;
    s->cma_min = all[0].cma_min;
    size_t len = strlen(c->path);
    if (len && c->path[len - 1] == ')')
        len--;
    if (s->cma)
        snprintf(c->path + len, sizeof c->path - len, ", single-copy on from %llu KiB)",
                 (unsigned long long)(s->cma_min >> 10));
    else
        snprintf(c->path + len, sizeof c->path - len, ", single-copy off: %.126s)",
                 bad >= 0 ? vs[bad].why : "out of memory");
out:
    free(all);
    free(vs);
    return st;
}

void vkg__shm_direct_free(struct vkg_shm *s)
{
    free(s->canary);
    free(s->scratch);
    free(s->blocks);
    s->canary = NULL;
    s->scratch = NULL;
    s->blocks = NULL;
}

/* ---- the allreduce ---- */

typedef struct direct {
    vkg_shm_ar *a;
    struct vkg_shm *s;
    uint32_t step;
    const uint8_t *send[VKG_SHM_MAX_RANKS], *recv[VKG_SHM_MAX_RANKS]; /* pools: mapped; or NULL */
    uint64_t send_at[VKG_SHM_MAX_RANKS], recv_at[VKG_SHM_MAX_RANKS];  /* otherwise: addresses */
} direct;

/* *off = p's offset in this rank's pool when [p, p + bytes) lies in it. */
static int in_my_pool(const struct vkg_shm *s, const void *p, size_t bytes, uint64_t *off)
{
    uintptr_t lo = (uintptr_t)(s->pool + (size_t)s->me * s->pool_bytes), x = (uintptr_t)p;
    if (!s->pool_bytes || x < lo || x - lo > s->pool_bytes || bytes > s->pool_bytes - (x - lo))
        return 0;
    *off = (uint64_t)(x - lo);
    return 1;
}

int vkg_comm_buffer_in_segment(const vkg_comm_t *c, const void *p, size_t bytes)
{
    uint64_t off;
    return c && c->shm && in_my_pool(c->shm, p, bytes, &off);
}

/* Local rank q's buffer b (0 send, 1 recv) from its ctl: mapped pointer or address. */
static void peer_buffer(direct *d, int q, int b)
{
    const vkg_shm_ctl *k = &d->s->ctl[q];
    const uint8_t *pool = d->s->pool + (size_t)q * d->s->pool_bytes;
    const uint8_t **p = b ? &d->recv[q] : &d->send[q];
    uint64_t *at = b ? &d->recv_at[q] : &d->send_at[q];
    *p = (k->in_pool >> b) & 1u ? pool + k->buf[b] : NULL;
    *at = k->buf[b];
}

static vkg_status read_failed(direct *d, int q, int e)
{
    vkg_status st;
    if (vkg__shm_aborted(&d->a->o, &st)) /* an abort explains it better */
        return st;
    return VKG_FAIL(VKG_ERR_PEER, "%s: reading rank %d's buffer (process_vm_readv): %s%s",
                    d->a->o.what, d->a->o.ranks[q], strerror(e),
                    e == ESRCH    ? " (it died?)"
                    : e == EFAULT ? " (it freed its buffer?)"
                                  : "");
}

/* Reduce this rank's slice [lo, hi) from every rank's send buffer into its recv buffer. */
static vkg_status reduce_slice(direct *d, size_t lo, size_t hi)
{
    vkg_shm_ar *a = d->a;
    struct vkg_shm *s = d->s;
    size_t es = a->es, piece = piece_bytes(s->n) / es;
    const uint8_t *from[VKG_SHM_MAX_RANKS];
    for (size_t e = lo; e < hi; e += piece) {
        size_t len = hi - e < piece ? hi - e : piece;
        for (int q = 0, k = 0; q < s->n; q++) {
            if (q == s->me) {
                from[q] = a->send + e * es;
            } else if (d->send[q]) {
                from[q] = d->send[q] + e * es;
            } else {
                uint8_t *buf = s->scratch + (size_t)k++ * piece_bytes(s->n);
                int err = cma_read(s, q, buf, d->send_at[q] + e * es, len * es);
                if (err)
                    return read_failed(d, q, err);
                from[q] = buf;
            }
        }
        vkg__shm_reduce_from(a, from, e, len, a->recv + e * es);
    }
    return VKG_OK;
}

/* Copy every other rank's slice of the result from its recv buffer into this rank's. */
static vkg_status gather_slices(direct *d)
{
    vkg_shm_ar *a = d->a;
    struct vkg_shm *s = d->s;
    for (int i = 1; i < s->n; i++) {
        int q = (s->me + i) % s->n; /* start at the next rank: ranks read different peers */
        size_t lo, hi;
        vkg__shm_slice(a, a->count, q, &lo, &hi);
        if (hi <= lo)
            continue;
        uint8_t *dst = a->recv + lo * a->es;
        if (d->recv[q]) {
            memcpy(dst, d->recv[q] + lo * a->es, (hi - lo) * a->es);
        } else {
            int err = cma_read(s, q, dst, d->recv_at[q] + lo * a->es, (hi - lo) * a->es);
            if (err)
                return read_failed(d, q, err);
        }
    }
    return VKG_OK;
}

/* Step g carried nothing: release it and leave the allreduce to the segment path from g + 1. */
static void pass(direct *d, int from_in)
{
    for (int w = from_in ? CTR_IN : CTR_RED; w <= CTR_OUT; w++)
        vkg__shm_publish(d->s, w, d->step + 1);
    d->s->step = d->step + 1;
    d->a->o.base = d->step + 1;
}

/* Publish this rank's buffers for step d->step and learn every rank's; cma: single-copy may
 * serve. *go = 0 when the step passed (the segment path runs from the next step); *reads: ranks
 * whose buffers are read with process_vm_readv (the same count on every rank). */
static vkg_status exchange(direct *d, int cma, int *go, int *reads)
{
    vkg_shm_ar *a = d->a;
    struct vkg_shm *s = d->s;
    size_t bytes = a->count * a->es;
    uint64_t off[2];
    int pooled = in_my_pool(s, a->send, bytes, &off[0]) && in_my_pool(s, a->recv, bytes, &off[1]);
    vkg_shm_ctl *k = &s->ctl[s->me]; /* written before `in` is raised: its release publishes it */
    k->buf[0] = pooled ? off[0] : (uint64_t)(uintptr_t)a->send;
    k->buf[1] = pooled ? off[1] : (uint64_t)(uintptr_t)a->recv;
    k->in_pool = pooled ? 3u : 0u;
    *go = *reads = 0;
    if (!pooled && !cma) { /* this rank's buffers would need process_vm_readv: all pass */
        pass(d, 1);
        return VKG_OK;
    }
    vkg__shm_publish(s, CTR_IN, d->step + 1);
    VKG_TRY(vkg__shm_wait_all(&a->o, CTR_IN, d->step + 1));
    for (int q = 0; q < s->n; q++) {
        peer_buffer(d, q, 0);
        peer_buffer(d, q, 1);
        *reads += !d->send[q] || !d->recv[q];
    }
    if (*reads && !cma) { /* every rank sees the same buffers, so every rank passes */
        pass(d, 0);
        return VKG_OK;
    }
    *go = 1;
    return VKG_OK;
}

/* This rank read everything of step g it needed: say so, and wait until nobody reads its
 * buffers any more. */
static vkg_status finish(direct *d, int engine)
{
    vkg__shm_publish(d->s, CTR_RED, d->step + 1);
    vkg__shm_publish(d->s, CTR_OUT, d->step + 1);
    VKG_TRY(vkg__shm_wait_all(&d->a->o, CTR_OUT, d->step + 1));
    d->s->step = d->step + 1;
    d->s->engine[engine]++;
    return VKG_OK;
}

vkg_status vkg__shm_direct_allreduce(vkg_shm_ar *a, int *done)
{
    struct vkg_shm *s = a->o.s;
    int cma = s->cma && a->count * a->es >= s->cma_min, go, reads;
    *done = 0;
    if (!cma && !s->pool_bytes)
        return VKG_OK;
    direct d = {.a = a, .s = s, .step = a->o.base};
    VKG_TRY(exchange(&d, cma, &go, &reads));
    if (!go)
        return VKG_OK;
    size_t lo, hi;
    vkg__shm_slice(a, a->count, s->me, &lo, &hi);
    VKG_TRY(reduce_slice(&d, lo, hi));
    vkg__shm_publish(s, CTR_RED, d.step + 1);
    VKG_TRY(vkg__shm_wait_all(&a->o, CTR_RED, d.step + 1));
    VKG_TRY(gather_slices(&d));
    *done = 1;
    return finish(&d, reads ? VKG_SHM_ENG_CMA : VKG_SHM_ENG_POOL);
}

vkg_status vkg__shm_direct_zero(vkg_shm_ar *a, const size_t *bounds, int reduce, int *done)
{
    struct vkg_shm *s = a->o.s;
    int go, reads;
    *done = 0;
    if (!s->pool_bytes)
        return VKG_OK;
    direct d = {.a = a, .s = s, .step = a->o.base};
    VKG_TRY(exchange(&d, 0, &go, &reads));
    if (!go)
        return VKG_OK;
    if (reduce)
        VKG_TRY(reduce_slice(&d, bounds[s->me], bounds[s->me + 1]));
    for (int q = 0; q < s->n && !reduce; q++)
        if (q != s->me && bounds[q + 1] > bounds[q])
            memcpy(a->recv + bounds[q] * a->es, d.recv[q] + bounds[q] * a->es,
                   (bounds[q + 1] - bounds[q]) * a->es);
    *done = 1;
    return finish(&d, VKG_SHM_ENG_ZERO_POOL);
}
