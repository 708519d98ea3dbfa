/* Communicator groups (see vkgpt/comm.h): collectives over a subset of ranks, built on the
 * communicator's tagged point-to-point messages. A group call's tag is 1 << 31 | id << 20 |
 * (sequence number mod 2^20): user tags stay below 2^31, and a peer's messages of one call are
 * matched in order (point-to-point messages from one peer arrive in order; other tags wait in the
 * communicator's stash). Not here: the wire, deadlines and liveness (coll.c, wait.c).
 *
 * When every member shares this host (and the communicator's policy allows shared memory, as for
 * its own collectives), the group's first collective sets up a segment of the members' own
 * (shm_setup.c, agreed over the group's messages) and the collectives run in it with the ZeroMQ
 * ring's order of additions (chunk k of this file's chunking summed from member k on), so both
 * paths give the same bits. The segment is the group's; the communicator lists it while it exists
 * so that a failing rank sets its abort word too (vkg__shm_abort). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "comm_testing.h"
#include "shm.h"
#include "vkgpt/comm.h"

#define GROUP_TAG_BIT 0x80000000u

struct vkg_group {
    vkg_comm_t *comm;
    int *ranks; /* (n) communicator ranks in group-rank order */
    int n, me;  /* size, this rank's group rank */
    uint32_t id, seq;
    int world;           /* the communicator's whole world: its own collectives (vkg_group_world) */
    int shm_decided;     /* the segment question was settled (at the first collective) */
    struct vkg_shm *shm; /* the members' segment, or NULL: tagged messages */
    unsigned char *packed; /* vkg_group_allreduce_codec: every member's block */
    size_t packed_bytes;
};

vkg_status vkg_group_create(vkg_comm_t *c, const int *ranks, int n, uint32_t id, vkg_group_t **out)
{
    int world = vkg_comm_size(c), self = vkg_comm_rank(c), me = -1;
    VKG_CHECK(n >= 1 && n <= world, VKG_ERR_INVALID_ARG,
              "group %u: %d members for a communicator of %d ranks", (unsigned)id, n, world);
    VKG_CHECK(id <= VKG_GROUP_MAX_ID, VKG_ERR_INVALID_ARG, "group id %u is over %d", (unsigned)id,
              VKG_GROUP_MAX_ID);
    for (int i = 0; i < n; i++) {
        VKG_CHECK(ranks[i] >= 0 && ranks[i] < world, VKG_ERR_INVALID_ARG,
                  "group %u: member %d is rank %d, outside [0, %d)", (unsigned)id, i, ranks[i],
                  world);
        for (int j = 0; j < i; j++)
            VKG_CHECK(ranks[j] != ranks[i], VKG_ERR_INVALID_ARG,
                      "group %u: rank %d is listed twice", (unsigned)id, ranks[i]);
        if (ranks[i] == self)
            me = i;
    }
    VKG_CHECK(me >= 0, VKG_ERR_INVALID_ARG, "group %u: this rank (%d) is not a member",
              (unsigned)id, self);
    vkg_group_t *g = calloc(1, sizeof *g);
    int *r = malloc((size_t)n * sizeof *r);
    if (!g || !r) {
        free(g), free(r);
        return VKG_FAIL(VKG_ERR_NOMEM, "no memory for group %u", (unsigned)id);
    }
    memcpy(r, ranks, (size_t)n * sizeof *r);
    *g = (vkg_group_t){.comm = c, .ranks = r, .n = n, .me = me, .id = id};
    *out = g;
    return VKG_OK;
}

vkg_status vkg_group_world(vkg_comm_t *c, uint32_t id, vkg_group_t **out)
{
    int n = vkg_comm_size(c);
    int *ranks = malloc((size_t)n * sizeof *ranks);
    VKG_CHECK(ranks, VKG_ERR_NOMEM, "no memory for group %u's %d ranks", (unsigned)id, n);
    for (int i = 0; i < n; i++)
        ranks[i] = i;
    vkg_status st = vkg_group_create(c, ranks, n, id, out);
    free(ranks);
    if (st == VKG_OK)
        (*out)->world = 1;
    return st;
}

void vkg_group_destroy(vkg_group_t **pg)
{
    vkg_group_t *g = pg ? *pg : NULL;
    if (!g)
        return;
    vkg__shm_group_free(&g->shm);
    free(g->ranks);
    free(g->packed);
    free(g);
    *pg = NULL;
}

int vkg__group_uses_shm(const vkg_group_t *g)
{
    return g->shm != NULL;
}

int vkg_group_rank(const vkg_group_t *g)
{
    return g->me;
}

int vkg_group_size(const vkg_group_t *g)
{
    return g->n;
}

int vkg_group_member(const vkg_group_t *g, int i)
{
    return i >= 0 && i < g->n ? g->ranks[i] : -1;
}

/* The tag of this group's next call. */
static uint32_t next_tag(vkg_group_t *g)
{
    uint32_t t = GROUP_TAG_BIT | g->id << 20 | (g->seq & 0xFFFFFu);
    g->seq++;
    return t;
}

/* Chunk k of n floats cut into g->n nearly equal chunks: [*off, *off + *len). */
static void chunk(const vkg_group_t *g, size_t n, int k, size_t *off, size_t *len)
{
    size_t base = n / (size_t)g->n, extra = n % (size_t)g->n;
    *off = (size_t)k * base + ((size_t)k < extra ? (size_t)k : extra);
    *len = base + ((size_t)k < extra ? 1 : 0);
}

static vkg_status p2p_allgather(vkg_group_t *g, const void *send, size_t bytes, void *recv);
static vkg_status p2p_allgather_tag(vkg_group_t *g, uint32_t tag, const void *send, size_t bytes,
                                    void *recv);

static vkg_status agree(void *arg, const void *mine, size_t bytes, void *all)
{
    return p2p_allgather(arg, mine, bytes, all);
}

/* At the first collective: the members' segment when they share this host. *on: use it. */
static vkg_status use_shm(vkg_group_t *g, int *on)
{
    if (!g->shm_decided) {
        g->shm_decided = 1;
        VKG_TRY(vkg__shm_group_setup(g->comm, g->ranks, g->n, g->me, g->id, agree, g, &g->shm));
    }
    *on = g->shm != NULL;
    return VKG_OK;
}

/* A failure in the segment fails the communicator and tells the peers, as a failed message
 * would. */
static vkg_status shm_done(vkg_group_t *g, vkg_status st)
{
    return st < 0 ? vkg__comm_fail(g->comm, st, 1) : st;
}

static void shm_what(const vkg_group_t *g, const char *name, char *what, size_t cap)
{
    snprintf(what, cap, "group %u %s #%u (shm)", (unsigned)g->id, name, (unsigned)(g->seq - 1));
}

/* The fp32 ring over the members (or their segment), chunk k summed from member k on. */
static vkg_status ring_allreduce(vkg_group_t *g, float *buf, size_t n)
{
    uint32_t tag = next_tag(g);
    if (g->n == 1 || n == 0)
        return VKG_OK;
    int on;
    VKG_TRY(use_shm(g, &on));
    if (on) {
        size_t rb[VKG_SHM_MAX_RANKS + 1], len;
        for (int k = 0; k < g->n; k++)
            chunk(g, n, k, &rb[k], &len);
        rb[g->n] = n;
        char what[64];
        shm_what(g, "allreduce", what, sizeof what);
        VKG_TRY(vkg__comm_usable(g->comm));
        return shm_done(g, vkg__shm_group_allreduce(g->comm, g->shm, g->ranks, what, buf, n, rb));
    }
    int next = g->ranks[(g->me + 1) % g->n], prev = g->ranks[(g->me + g->n - 1) % g->n];
    size_t most = n / (size_t)g->n + 1;
    float *tmp = malloc(most * sizeof *tmp);
    VKG_CHECK(tmp, VKG_ERR_NOMEM, "group %u: no memory for %zu floats", (unsigned)g->id, most);
    vkg_status st = VKG_OK;
    /* Reduce-scatter: after step s, chunk (me - s - 1) holds the sum of s + 2 members. */
    for (int s = 0; st == VKG_OK && s < g->n - 1; s++) {
        size_t so, sl, ro, rl;
        chunk(g, n, (g->me - s + g->n) % g->n, &so, &sl);
        chunk(g, n, (g->me - s - 1 + 2 * g->n) % g->n, &ro, &rl);
        st = vkg_comm_send(g->comm, next, tag, buf + so, sl * sizeof *buf);
        if (st == VKG_OK)
            st = vkg_comm_recv(g->comm, prev, tag, tmp, rl * sizeof *tmp);
        for (size_t i = 0; st == VKG_OK && i < rl; i++)
            buf[ro + i] = tmp[i] + buf[ro + i];
    }
    /* Allgather: member me owns the finished chunk (me + 1) and passes chunks along. */
    for (int s = 0; st == VKG_OK && s < g->n - 1; s++) {
        size_t so, sl, ro, rl;
        chunk(g, n, (g->me + 1 - s + g->n) % g->n, &so, &sl);
        chunk(g, n, (g->me - s + g->n) % g->n, &ro, &rl);
        st = vkg_comm_send(g->comm, next, tag, buf + so, sl * sizeof *buf);
        if (st == VKG_OK)
            st = vkg_comm_recv(g->comm, prev, tag, buf + ro, rl * sizeof *buf);
    }
    free(tmp);
    return st;
}

vkg_status vkg_group_broadcast(vkg_group_t *g, void *buf, size_t bytes, int root)
{
    uint32_t tag = next_tag(g);
    VKG_CHECK(root >= 0 && root < g->n, VKG_ERR_INVALID_ARG,
              "group %u: broadcast root %d outside [0, %d)", (unsigned)g->id, root, g->n);
    if (g->world)
        return vkg_comm_broadcast(g->comm, buf, bytes, root);
    if (g->n == 1 || bytes == 0)
        return VKG_OK;
    int on;
    VKG_TRY(use_shm(g, &on));
    if (on) {
        char what[64];
        shm_what(g, "broadcast", what, sizeof what);
        VKG_TRY(vkg__comm_usable(g->comm));
        return shm_done(
            g, vkg__shm_group_broadcast(g->comm, g->shm, g->ranks, what, buf, bytes, root));
    }
    if (g->me != root)
        return vkg_comm_recv(g->comm, g->ranks[root], tag, buf, bytes);
    for (int i = 0; i < g->n; i++)
        if (i != root)
            VKG_TRY(vkg_comm_send(g->comm, g->ranks[i], tag, buf, bytes));
    return VKG_OK;
}

vkg_status vkg_group_allgather(vkg_group_t *g, const void *send, size_t bytes, void *recv)
{
    uint32_t tag = next_tag(g);
    if (g->world)
        return vkg_comm_allgather(g->comm, send, bytes, recv);
    if (g->n > 1 && bytes > 0) {
        int on;
        VKG_TRY(use_shm(g, &on));
        if (on) {
            char what[64];
            shm_what(g, "allgather", what, sizeof what);
            VKG_TRY(vkg__comm_usable(g->comm));
            return shm_done(
                g, vkg__shm_group_allgather(g->comm, g->shm, g->ranks, what, send, bytes, recv));
        }
    }
    return p2p_allgather_tag(g, tag, send, bytes, recv);
}

/* The allgather over tagged messages, under tag. */
static vkg_status p2p_allgather_tag(vkg_group_t *g, uint32_t tag, const void *send, size_t bytes,
                                    void *recv)
{
    unsigned char *out = recv;
    if (out + (size_t)g->me * bytes != send)
        memmove(out + (size_t)g->me * bytes, send, bytes);
    for (int i = 0; i < g->n; i++) /* send to everyone first: sends do not wait for receives */
        if (i != g->me)
            VKG_TRY(vkg_comm_send(g->comm, g->ranks[i], tag, out + (size_t)g->me * bytes, bytes));
    for (int i = 0; i < g->n; i++)
        if (i != g->me)
            VKG_TRY(vkg_comm_recv(g->comm, g->ranks[i], tag, out + (size_t)i * bytes, bytes));
    return VKG_OK;
}

static vkg_status p2p_allgather(vkg_group_t *g, const void *send, size_t bytes, void *recv)
{
    return p2p_allgather_tag(g, next_tag(g), send, bytes, recv);
}

/* ---- collectives with a dtype ---- */

/* The element size of dtype for group call `name`: fp32 and bf16 only. */
static vkg_status elem_size(const vkg_group_t *g, vkg_comm_dtype dt, const char *name, size_t *es)
{
    VKG_CHECK(dt == VKG_COMM_F32 || dt == VKG_COMM_BF16, VKG_ERR_INVALID_ARG,
              "group %u %s: dtype %d is not fp32 or bf16", (unsigned)g->id, name, (int)dt);
    *es = vkg_comm_dtype_size(dt);
    return VKG_OK;
}

/* bounds: g->n + 1 offsets from 0 to n, nondecreasing. */
static vkg_status check_bounds(const vkg_group_t *g, const size_t *b, size_t n, const char *name)
{
    VKG_CHECK(b, VKG_ERR_INVALID_ARG, "group %u %s: no chunk bounds", (unsigned)g->id, name);
    VKG_CHECK(b[0] == 0 && b[g->n] == n, VKG_ERR_INVALID_ARG,
              "group %u %s: chunk bounds run from %zu to %zu, not from 0 to %zu", (unsigned)g->id,
              name, b[0], b[g->n], n);
    for (int q = 0; q < g->n; q++)
        VKG_CHECK(b[q] <= b[q + 1], VKG_ERR_INVALID_ARG,
                  "group %u %s: chunk %d's bounds [%zu, %zu) decrease", (unsigned)g->id, name, q,
                  b[q], b[q + 1]);
    return VKG_OK;
}

/* Elements [lo, hi) of n, summed from the members' inputs as vkg_group_allreduce adds them:
 * all[q] is member q's [lo, hi), the sum goes to dst. fp32: element i of the ring's chunk k
 * summed from member k on around the ring; bf16: widened, summed in fp32 in member order, rounded
 * once. */
static void sum_range(const vkg_group_t *g, const void *const *all, void *dst, size_t n, size_t lo,
                      size_t hi, vkg_comm_dtype dt)
{
    if (dt == VKG_COMM_BF16) {
        vkg__reduce_ordered(dst, all, g->n, hi - lo, dt, 0);
        return;
    }
    float *out = dst;
    for (int k = 0; k < g->n; k++) {
        size_t co, cl;
        chunk(g, n, k, &co, &cl);
        size_t from = co > lo ? co : lo, to = co + cl < hi ? co + cl : hi;
        for (size_t i = from; i < to; i++) {
            float acc = ((const float *)all[k])[i - lo];
            for (int j = 1; j < g->n; j++)
                acc = acc + ((const float *)all[(k + j) % g->n])[i - lo];
            out[i - lo] = acc;
        }
    }
}

/* Reduce-scatter over tagged messages: each member sends every other its chunk straight, and
 * sums its own chunk from the members' inputs (sum_range). */
static vkg_status p2p_reduce_scatter(vkg_group_t *g, uint32_t tag, unsigned char *buf, size_t n,
                                     const size_t *b, vkg_comm_dtype dt, size_t es)
{
    for (int i = 1; i < g->n; i++) { /* sends do not wait for receives */
        int q = (g->me + i) % g->n;
        if (b[q + 1] > b[q])
            VKG_TRY(
                vkg_comm_send(g->comm, g->ranks[q], tag, buf + b[q] * es, (b[q + 1] - b[q]) * es));
    }
    size_t len = b[g->me + 1] - b[g->me];
    if (len == 0)
        return VKG_OK;
    unsigned char *tmp = malloc((size_t)g->n * len * es);
    const void **all = malloc((size_t)g->n * sizeof *all);
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, tmp && all, VKG_ERR_NOMEM, done, "group %u: no memory for %d x %zu elements",
                   (unsigned)g->id, g->n, len);
    for (int q = 0; q < g->n && st == VKG_OK; q++) {
        all[q] = tmp + (size_t)q * len * es;
        if (q == g->me)
            memcpy(tmp + (size_t)q * len * es, buf + b[q] * es, len * es);
        else
            st = vkg_comm_recv(g->comm, g->ranks[q], tag, tmp + (size_t)q * len * es, len * es);
    }
    if (st == VKG_OK)
        sum_range(g, all, buf + b[g->me] * es, n, b[g->me], b[g->me + 1], dt);
done:
    free(tmp), free(all);
    return st;
}

/* Allgather of unequal chunks over tagged messages. */
static vkg_status p2p_allgatherv(vkg_group_t *g, uint32_t tag, unsigned char *buf, const size_t *b,
                                 size_t es)
{
    size_t lo = b[g->me], len = b[g->me + 1] - lo;
    for (int q = 0; q < g->n && len; q++)
        if (q != g->me)
            VKG_TRY(vkg_comm_send(g->comm, g->ranks[q], tag, buf + lo * es, len * es));
    for (int q = 0; q < g->n; q++)
        if (q != g->me && b[q + 1] > b[q])
            VKG_TRY(
                vkg_comm_recv(g->comm, g->ranks[q], tag, buf + b[q] * es, (b[q + 1] - b[q]) * es));
    return VKG_OK;
}

/* In the members' segment: every member's whole input gathered (the segment's allgather), and
 * [lo, hi) summed from them as the messages' path sums it. */
static vkg_status shm_gather_sum(vkg_group_t *g, unsigned char *buf, size_t n, size_t lo, size_t hi,
                                 vkg_comm_dtype dt, size_t es)
{
    unsigned char *tmp = malloc((size_t)g->n * n * es);
    const void **all = malloc((size_t)g->n * sizeof *all);
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, tmp && all, VKG_ERR_NOMEM, done, "group %u: no memory for %d x %zu elements",
                   (unsigned)g->id, g->n, n);
    char what[64];
    shm_what(g, "reduce-scatter", what, sizeof what);
    VKG_TRY_GOTO(st, vkg__comm_usable(g->comm), done);
    st = shm_done(g, vkg__shm_group_allgather(g->comm, g->shm, g->ranks, what, buf, n * es, tmp));
    for (int q = 0; q < g->n && st == VKG_OK; q++)
        all[q] = tmp + ((size_t)q * n + lo) * es;
    if (st == VKG_OK)
        sum_range(g, all, buf + lo * es, n, lo, hi, dt);
done:
    free(tmp), free(all);
    return st;
}

/* In the members' segment: the chunks padded to the largest and gathered (its allgather). */
static vkg_status shm_allgatherv(vkg_group_t *g, unsigned char *buf, const size_t *b, size_t es)
{
    size_t most = 0;
    for (int q = 0; q < g->n; q++)
        most = b[q + 1] - b[q] > most ? b[q + 1] - b[q] : most;
    if (most == 0)
        return VKG_OK;
    unsigned char *tmp = calloc((size_t)g->n + 1, most * es);
    VKG_CHECK(tmp, VKG_ERR_NOMEM, "group %u: no memory for %d x %zu elements", (unsigned)g->id,
              g->n + 1, most);
    unsigned char *mine = tmp + (size_t)g->n * most * es;
    memcpy(mine, buf + b[g->me] * es, (b[g->me + 1] - b[g->me]) * es);
    char what[64];
    shm_what(g, "allgatherv", what, sizeof what);
    vkg_status st = vkg__comm_usable(g->comm);
    if (st == VKG_OK)
        st = shm_done(
            g, vkg__shm_group_allgather(g->comm, g->shm, g->ranks, what, mine, most * es, tmp));
    for (int q = 0; q < g->n && st == VKG_OK; q++)
        memcpy(buf + b[q] * es, tmp + (size_t)q * most * es, (b[q + 1] - b[q]) * es);
    free(tmp);
    return st;
}

vkg_status vkg_group_reduce_scatter(vkg_group_t *g, void *buf, size_t n, const size_t *bounds,
                                    vkg_comm_dtype dtype)
{
    uint32_t tag = next_tag(g);
    size_t es = 0;
    VKG_TRY(elem_size(g, dtype, "reduce-scatter", &es));
    VKG_TRY(check_bounds(g, bounds, n, "reduce-scatter"));
    if (g->world)
        return vkg_comm_reduce_scatter_dtype(g->comm, buf, n, bounds, dtype);
    if (g->n == 1 || n == 0)
        return VKG_OK;
    int on;
    VKG_TRY(use_shm(g, &on));
    if (on && dtype == VKG_COMM_F32) /* the segment's ring: the whole of buf ends summed */
        return ring_allreduce(g, buf, n);
    if (on)
        return shm_gather_sum(g, buf, n, bounds[g->me], bounds[g->me + 1], dtype, es);
    return p2p_reduce_scatter(g, tag, buf, n, bounds, dtype, es);
}

vkg_status vkg_group_allgatherv(vkg_group_t *g, void *buf, size_t n, const size_t *bounds,
                                vkg_comm_dtype dtype)
{
    uint32_t tag = next_tag(g);
    size_t es = 0;
    VKG_TRY(elem_size(g, dtype, "allgatherv", &es));
    VKG_TRY(check_bounds(g, bounds, n, "allgatherv"));
    if (g->world && dtype == VKG_COMM_F32)
        return vkg_comm_allgatherv(g->comm, buf, n, bounds);
    if (g->n == 1 || n == 0)
        return VKG_OK;
    int on = 0;
    if (!g->world)
        VKG_TRY(use_shm(g, &on));
    return on ? shm_allgatherv(g, buf, bounds, es) : p2p_allgatherv(g, tag, buf, bounds, es);
}

vkg_status vkg_group_allreduce(vkg_group_t *g, void *buf, size_t n, vkg_comm_dtype dtype)
{
    size_t es = 0;
    VKG_TRY(elem_size(g, dtype, "allreduce", &es));
    if (g->world)
        return vkg_comm_allreduce(g->comm, buf, buf, n, dtype, VKG_COMM_SUM);
    if (dtype == VKG_COMM_F32)
        return ring_allreduce(g, buf, n);
    if (g->n == 1 || n == 0) {
        next_tag(g);
        return VKG_OK;
    }
    int on;
    VKG_TRY(use_shm(g, &on));
    if (on) { /* bf16 in the segment: every input gathered, each member sums the whole */
        next_tag(g);
        return shm_gather_sum(g, buf, n, 0, n, dtype, es);
    }
    /* bf16 over messages: each member sums its chunk (in member order), then the chunks go round */
    size_t *b = malloc(((size_t)g->n + 1) * sizeof *b), len;
    VKG_CHECK(b, VKG_ERR_NOMEM, "group %u: no memory for %d bounds", (unsigned)g->id, g->n + 1);
    for (int k = 0; k < g->n; k++)
        chunk(g, n, k, &b[k], &len);
    b[g->n] = n;
    vkg_status st = vkg_group_reduce_scatter(g, buf, n, b, dtype);
    if (st == VKG_OK)
        st = vkg_group_allgatherv(g, buf, n, b, dtype);
    free(b);
    return st;
}

vkg_status vkg_group_allreduce_codec(vkg_group_t *g, float *buf, size_t n,
                                     const vkg_comm_codec *codec)
{
    VKG_CHECK(codec && codec->bytes && codec->pack && codec->unpack_add, VKG_ERR_INVALID_ARG,
              "group %u allreduce: a codec needs bytes, pack and unpack_add", (unsigned)g->id);
    if (n == 0)
        return VKG_OK;
    /* blocks rounded up to 4 bytes, so that every block's floats stay aligned */
    size_t bb = (codec->bytes(n, codec->ctx) + 3) & ~(size_t)3, all = (size_t)g->n * bb;
    VKG_CHECK(bb > 0 && all / (size_t)g->n == bb, VKG_ERR_INVALID_ARG,
              "group %u allreduce: a codec block of %zu bytes for %d members", (unsigned)g->id, bb,
              g->n);
    if (g->packed_bytes < all) {
        free(g->packed);
        g->packed = malloc(all);
        g->packed_bytes = g->packed ? all : 0;
        VKG_CHECK(g->packed, VKG_ERR_NOMEM, "group %u: no memory for %d blocks of %zu bytes",
                  (unsigned)g->id, g->n, bb);
    }
    unsigned char *mine = g->packed + (size_t)g->me * bb;
    memset(mine, 0, bb);
    codec->pack(buf, n, mine, codec->ctx);
    VKG_TRY(vkg_group_allgather(g, mine, bb, g->packed));
    for (int r = 0; r < g->n; r++)
        codec->unpack_add(g->packed + (size_t)r * bb, n, r == 0, buf, codec->ctx);
    return VKG_OK;
}
