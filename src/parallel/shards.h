/* ZeRO-1's shards (DESIGN.md section 6), for whole models (zero.c) and pipeline stages
 * (pp_strategy.c) alike: a model part's n parameters cut into N contiguous shards over its
 * data-parallel group, each member's AdamW holding the moments of its shard alone.
 *
 * The cut follows the gradient norm. One device adds the squares of the gradient [from, n) (from:
 * the start of the norm, past a tied copy counted elsewhere) in P partial sums over fixed ranges
 * (vkg_adamw_norm_partition), then adds the partial sums in a fixed order. Each shard holds a run
 * of whole partial sums, so after the reduce-scatter its owner computes them from the same bits
 * one device would have; the members gather every shard's partial sums and each adds them as one
 * device does (vkg__shards_norm): the norm, and so the clipping, is the unsharded one bit for bit.
 *
 * Leading cuts. A pipeline's last stage holds a copy of the tied embedding (the first stage's)
 * whose gradients are summed with the first stage's over the tie group after the data-parallel
 * reduction. Each member holds only its shard summed, so the two stages must cut it at the same
 * places: the first stage's cuts that fall inside it are given to the last stage as leading cuts
 * (`lead`); the shards they make hold no partial sums (the copy is outside the norm), and the rest
 * of the last stage is cut by its own partial sums. Then member r of both stages holds the same
 * piece of the tied embedding summed, and sums it over the tie group (vkg__shards_tied).
 *
 * Not here: the reduction (reducer.c), the optimizer (src/optim/adamw.c), the collectives
 * (transport/). Nothing here prints or talks to a device but through the optimizer.
 */
#ifndef VKG_PARALLEL_SHARDS_H
#define VKG_PARALLEL_SHARDS_H

#include <stddef.h>
#include <stdint.h>

#include "optim/adamw.h"
#include "vkgpt/comm.h"

typedef struct vkg_shards {
    int N, me;       /* shards, and this member's */
    size_t *bounds;  /* (N + 1) parameter bounds: shard q is [bounds[q], bounds[q + 1]) */
    size_t *pbounds; /* (N + 1) the norm's partial sums of shard q: [pbounds[q], pbounds[q + 1]) */
    size_t nparts, most;     /* the norm's partial sums; the most of one shard */
    float *parts, *gathered; /* (most) this shard's, (N x most) every shard's */
    float *all;              /* (nparts) in order */
} vkg_shards;

/* The cut of n parameters whose norm covers [from, n) into N shards: bounds (N + 1) and pbounds
 * (N + 1) as in vkg_shards. lead (nlead cuts, ascending, inside (0, from)) are the first cuts;
 * the K = N - nlead shards after them each hold a run of the P partial sums and start where it
 * does (the first at the last leading cut, or 0). Without a tied copy (from 0) shard k holds
 * partial sums [P k / K, P (k + 1) / K) (they are nearly equal in size); with one, each cut is
 * the first partial sum's start at or past an even share of the parameters from the last leading
 * cut on (the copy's tail has no partial sums), each shard keeping at least one. Without a
 * device. Errors: VKG_ERR_INVALID_ARG naming --zero when the norm has fewer
 * partial sums than those K shards, or the cuts leave a shard empty. */
vkg_status vkg__shards_cut(size_t n, size_t from, int N, const size_t *lead, int nlead,
                           size_t *bounds, size_t *pbounds);

/* z over the cut of vkg__shards_cut for member me of N; z zeroed first. Errors: the cut's,
 * VKG_ERR_NOMEM. */
vkg_status vkg__shards_init(vkg_shards *z, size_t n, size_t from, int N, int me, const size_t *lead,
                            int nlead);
void vkg__shards_free(vkg_shards *z);

/* Shard the norm of opt (an optimizer of the part's n parameters whose norm starts at from; its
 * moments cover this member's shard) along this member's partial sums. */
vkg_status vkg__shards_shard_norm(const vkg_shards *z, vkg_adamw *opt);

/* The part's sum of squares, bitwise one device's: this shard's partial sums computed by opt,
 * every shard's gathered over g (the data-parallel group, member order = shard order), added in
 * order by opt. *ms: the gather's time. */
vkg_status vkg__shards_norm(vkg_shards *z, vkg_group_t *g, vkg_adamw *opt, float *sumsq,
                            double *ms);

/* Every shard of x (the part's n floats on the host, this member's shard in place) to every
 * member of g. */
vkg_status vkg__shards_share(const vkg_shards *z, vkg_group_t *g, float *x);

/* This member's piece of [0, count) (a tied copy at the part's start): [*lo, *hi). */
void vkg__shards_tied(const vkg_shards *z, size_t count, size_t *lo, size_t *hi);

#endif
