/* Deterministic sum of squares over one or several flat tensors (the global gradient norm for
 * clipping), in two stages without atomics:
 *   sumsq_partial.comp: each tensor is cut into segments of at most 2^30 elements (so shader
 *     indices stay small); each segment is cut into contiguous chunks, one per workgroup, and each
 *     workgroup writes one partial sum into the scratch tensor. The chunks depend only on the
 *     segment length (at most SUMSQ_PARTS of them, SUMSQ_GRAIN elements apart), never on the
 *     device or its tuning: a sharded norm (ZeRO-1) cuts its shards at them, so every rank, on
 *     any device, must cut the same. Only the workgroup size (the lanes that stride through a
 *     chunk) is the device's.
 *   sumsq_final.comp: one workgroup adds every partial, in a fixed order, into out[0].
 * The stage-1 dispatches are independent and recorded as one group. Each stage may also be
 * recorded alone (a sharded optimizer computes some partials per rank, gathers them and adds them
 * all as vkg_op_sumsq would). This file does not take the square root: the consumer (AdamW)
 * does.
 * Index limit (src/ops/op_util.h): the partials must not depend on it (the result would change
 * with the limit), so the segments stay 2^30 elements; when a segment holds more than the limit,
 * stage 1 takes the wide variant of its kernel (sumsq_partial.comp WIDE = 1), whose invocations
 * walk their elements' addresses with 64-bit arithmetic and add the same elements in the same
 * order. The partials of all tensors must fit one dispatch of stage 2. */
#include <stdio.h>

#include "ops/op_util.h"
#include "ops/ops.h"

#define SUMSQ_SEGMENT ((size_t)1 << 30) /* elements per stage-1 dispatch at most */
/* The partition: at most SUMSQ_PARTS chunks a segment, each a multiple of SUMSQ_GRAIN elements
 * and at least SUMSQ_MIN_CHUNK (64 x 64 x 4: the values CPU devices were tuned with, so their sums
 * kept their bits when the partition stopped being a tuning field). */
#define SUMSQ_PARTS 64u
#define SUMSQ_GRAIN 64u
#define SUMSQ_MIN_CHUNK (SUMSQ_GRAIN * 4u)

typedef struct push_sumsq_partial {
    uint64_t x, partials;
    uint32_t n, chunk;
} push_sumsq_partial;
VKG_PUSH_CHECK(push_sumsq_partial, sumsq_partial);

typedef struct push_sumsq_final {
    uint64_t partials, out;
    uint32_t count, accumulate;
} push_sumsq_final;
VKG_PUSH_CHECK(push_sumsq_final, sumsq_final);

/* Workgroup size of sumsq_partial (a power of two), from the device's tuning: the lanes that
 * stride through a chunk. */
static uint32_t wg_for(const vkg_device_t *dev)
{
    return vkg_device_tuning_get(dev).sumsq_wg;
}

/* Workgroups for a segment of n elements (0 for n = 0), and the elements each one owns. */
static uint32_t segment_groups(size_t n, uint32_t *chunk)
{
    size_t per = (n + SUMSQ_PARTS - 1) / SUMSQ_PARTS;
    size_t ch = (per + SUMSQ_GRAIN - 1) / SUMSQ_GRAIN * SUMSQ_GRAIN;
    if (ch < SUMSQ_MIN_CHUNK)
        ch = SUMSQ_MIN_CHUNK;
    *chunk = (uint32_t)ch;
    return (uint32_t)((n + ch - 1) / ch);
}

static size_t partials_for(size_t n)
{
    return vkg_op_sumsq_partition(n, NULL);
}

size_t vkg_op_sumsq_scratch_elems(const size_t *ns, int count)
{
    size_t total = 0;
    for (int k = 0; k < count; k++)
        total += partials_for(ns[k]);
    return total ? total : 1;
}

vkg_status vkg_op_sumsq(vkg_cmd *c, vkg_tensor out, const vkg_tensor *xs, const size_t *ns,
                        int count, vkg_tensor scratch, int accumulate)
{
    const char *op = "sumsq";
    VKG_CHECK(count >= 1 && xs && ns, VKG_ERR_INVALID_ARG,
              "%s: needs at least one tensor (count=%d)", op, count);
    VKG_TRY(vkg__op_need(op, "out", out, 1));
    uint32_t wg = wg_for(vkg_cmd_device(c));
    size_t total = 0;
    for (int k = 0; k < count; k++) {
        char name[32];
        snprintf(name, sizeof name, "xs[%d]", k);
        VKG_TRY(vkg__op_need(op, name, xs[k], ns[k]));
        total += partials_for(ns[k]);
    }
    size_t limit;
    VKG_TRY(vkg__op_limit(op, &limit));
    VKG_TRY(vkg__op_fits(op, "the number of partial sums", total, limit));
    VKG_TRY(vkg__op_need(op, "scratch", scratch, total));

    uint32_t spec[4] = {wg, 1, 1, 1};
    size_t at = 0; /* next partial */
    vkg_status st = VKG_OK;
    vkg_cmd_group_begin(c);
    for (int k = 0; k < count && st == VKG_OK; k++) {
        for (size_t off = 0; off < ns[k] && st == VKG_OK; off += SUMSQ_SEGMENT) {
            size_t seg = ns[k] - off < SUMSQ_SEGMENT ? ns[k] - off : SUMSQ_SEGMENT;
            uint32_t chunk, groups = segment_groups(seg, &chunk);
            push_sumsq_partial p = {.x = xs[k].addr + off * 4,
                                    .partials = scratch.addr + at * 4,
                                    .n = (uint32_t)seg,
                                    .chunk = chunk};
            st = vkg_cmd_dispatch(c, VKG_KERNEL_sumsq_partial, spec, seg > limit ? 4 : 3, &p,
                                  sizeof p, groups, 1, 1, "sumsq_partial");
            at += groups;
        }
    }
    vkg_cmd_group_end(c);
    VKG_TRY(st);
    vkg_cmd_barrier(c); /* explicit: the caller may have been inside a group */
    return vkg_op_sumsq_final(c, out, scratch, total, accumulate);
}

size_t vkg_op_sumsq_partition(size_t n, size_t *bounds)
{
    size_t p = 0;
    for (size_t off = 0; off < n; off += SUMSQ_SEGMENT) {
        size_t seg = n - off < SUMSQ_SEGMENT ? n - off : SUMSQ_SEGMENT;
        uint32_t chunk, groups = segment_groups(seg, &chunk);
        for (uint32_t g = 0; bounds && g < groups; g++)
            bounds[p + g] = off + (size_t)g * chunk;
        p += groups;
    }
    if (bounds)
        bounds[p] = n;
    return p;
}

vkg_status vkg_op_sumsq_partials(vkg_cmd *c, vkg_tensor partials, vkg_tensor x, size_t n,
                                 size_t first, size_t count)
{
    const char *op = "sumsq_partials";
    uint32_t wg = wg_for(vkg_cmd_device(c));
    size_t total = partials_for(n);
    VKG_CHECK(first <= total && count <= total - first, VKG_ERR_INVALID_ARG,
              "%s: partial sums [%zu, %zu) asked of a tensor of %zu elements, which has %zu", op,
              first, first + count, n, total);
    VKG_TRY(vkg__op_need(op, "x", x, n));
    VKG_TRY(vkg__op_need(op, "partials", partials, count));
    size_t limit;
    VKG_TRY(vkg__op_limit(op, &limit));
    uint32_t spec[4] = {wg, 1, 1, 1}; /* the wide variant as vkg_op_sumsq takes it */
    size_t at = 0;                    /* the first partial of the segment */
    vkg_status st = VKG_OK;
    vkg_cmd_group_begin(c);
    for (size_t off = 0; off < n && st == VKG_OK; off += SUMSQ_SEGMENT) {
        size_t seg = n - off < SUMSQ_SEGMENT ? n - off : SUMSQ_SEGMENT;
        uint32_t chunk, groups = segment_groups(seg, &chunk);
        size_t g0 = first > at ? first - at : 0, g1 = first + count - at;
        g1 = g1 < groups ? g1 : groups;
        if (first + count > at && g0 < g1) { /* this segment's groups [g0, g1) */
            size_t e0 = g0 * chunk, e1 = g1 * chunk < seg ? g1 * chunk : seg;
            push_sumsq_partial p = {.x = x.addr + (off + e0) * 4,
                                    .partials = partials.addr + (at + g0 - first) * 4,
                                    .n = (uint32_t)(e1 - e0),
                                    .chunk = chunk};
            st = vkg_cmd_dispatch(c, VKG_KERNEL_sumsq_partial, spec, e1 - e0 > limit ? 4 : 3, &p,
                                  sizeof p, (uint32_t)(g1 - g0), 1, 1, "sumsq_partial");
        }
        at += groups;
    }
    vkg_cmd_group_end(c);
    return st;
}

vkg_status vkg_op_sumsq_final(vkg_cmd *c, vkg_tensor out, vkg_tensor partials, size_t count,
                              int accumulate)
{
    const char *op = "sumsq_final";
    VKG_TRY(vkg__op_need(op, "out", out, 1));
    VKG_TRY(vkg__op_need(op, "partials", partials, count));
    size_t limit;
    VKG_TRY(vkg__op_limit(op, &limit));
    VKG_TRY(vkg__op_fits(op, "the number of partial sums", count, limit));
    uint32_t spec[3] = {wg_for(vkg_cmd_device(c)), 1, 1};
    push_sumsq_final f = {.partials = partials.addr,
                          .out = out.addr,
                          .count = (uint32_t)count,
                          .accumulate = accumulate ? 1u : 0u};
    return vkg_cmd_dispatch(c, VKG_KERNEL_sumsq_final, spec, 3, &f, sizeof f, 1, 1, 1,
                            "sumsq_final");
}
