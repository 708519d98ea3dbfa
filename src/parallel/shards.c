/* ZeRO-1's shards (see shards.h): the cut at the norm's partial sums, the sharded norm and the
 * shards' exchange over a data-parallel group. */
#include "parallel/shards.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "os/clock.h"

vkg_status vkg__shards_cut(size_t n, size_t from, int N, const size_t *lead, int nlead,
                           size_t *bounds, size_t *pbounds)
{
    VKG_CHECK(N >= 1 && nlead >= 0 && nlead < N && from <= n, VKG_ERR_INVALID_ARG,
              "--zero 1: %d shards with %d leading cuts of %zu parameters (the norm from %zu)", N,
              nlead, n, from);
    size_t P = vkg_adamw_norm_partition(n - from, NULL);
    int K = N - nlead;
    VKG_CHECK(P >= (size_t)K, VKG_ERR_INVALID_ARG,
              "--zero 1: the gradient norm of these %zu parameters is added in %zu partial sums, "
              "fewer than the %d shards to cut it into; use fewer data-parallel ranks or a larger "
              "model",
              n - from, P, K);
    size_t *pb = malloc((P + 1) * sizeof *pb);
    VKG_CHECK(pb, VKG_ERR_NOMEM, "no memory for %zu partial sums", P);
    vkg_adamw_norm_partition(n - from, pb);
    bounds[0] = 0, pbounds[0] = 0;
    for (int q = 1; q <= nlead; q++)
        bounds[q] = lead[q - 1], pbounds[q] = 0;
    size_t start = nlead ? lead[nlead - 1] : 0, p = 0;
    for (int k = 1; k < K; k++) {
        if (!from) { /* no tied copy: the partial sums, nearly equal, evenly by count */
            p = P * (size_t)k / (size_t)K;
        } else { /* the first cut at or past an even share of [start, n) */
            size_t target = start + (n - start) / (size_t)K * (size_t)k;
            size_t lo = p + 1, hi = P - (size_t)(K - k);
            for (p = lo; p < hi && from + pb[p] < target; p++)
                ;
        }
        bounds[nlead + k] = from + pb[p], pbounds[nlead + k] = p;
    }
    bounds[N] = n, pbounds[N] = P;
    free(pb);
    for (int q = 0; q < nlead; q++)
        VKG_CHECK(lead[q] < from, VKG_ERR_INVALID_ARG,
                  "--zero 1: leading cut %zu is past the norm's start %zu", lead[q], from);
    for (int q = 0; q < N; q++)
        VKG_CHECK(bounds[q] < bounds[q + 1], VKG_ERR_INVALID_ARG,
                  "--zero 1: shard %d of %d of these %zu parameters would be empty ([%zu, %zu))", q,
                  N, n, bounds[q], bounds[q + 1]);
    return VKG_OK;
}

vkg_status vkg__shards_init(vkg_shards *z, size_t n, size_t from, int N, int me, const size_t *lead,
                            int nlead)
{
    memset(z, 0, sizeof *z);
    z->N = N, z->me = me;
    z->bounds = malloc(((size_t)N + 1) * sizeof *z->bounds);
    z->pbounds = malloc(((size_t)N + 1) * sizeof *z->pbounds);
    VKG_CHECK(z->bounds && z->pbounds, VKG_ERR_NOMEM, "no memory for %d shards", N);
    VKG_TRY(vkg__shards_cut(n, from, N, lead, nlead, z->bounds, z->pbounds));
    z->nparts = z->pbounds[N];
    for (int q = 0; q < N; q++) {
        size_t c = z->pbounds[q + 1] - z->pbounds[q];
        z->most = c > z->most ? c : z->most;
    }
    z->parts = calloc(z->most ? z->most : 1, sizeof *z->parts);
    z->gathered = malloc(((size_t)N * z->most + 1) * sizeof *z->gathered);
    z->all = malloc((z->nparts + 1) * sizeof *z->all);
    VKG_CHECK(z->parts && z->gathered && z->all, VKG_ERR_NOMEM, "no memory for %zu partial sums",
              z->nparts);
    return VKG_OK;
}

void vkg__shards_free(vkg_shards *z)
{
    free(z->bounds), free(z->pbounds), free(z->parts), free(z->gathered), free(z->all);
    memset(z, 0, sizeof *z);
}

vkg_status vkg__shards_shard_norm(const vkg_shards *z, vkg_adamw *opt)
{
    size_t first = z->pbounds[z->me], count = z->pbounds[z->me + 1] - first;
    VKG_TRY(vkg_adamw_norm_shard(opt, first, count));
    VKG_CHECK(vkg_adamw_norm_parts(opt) == z->nparts, VKG_ERR_STATE,
              "ZeRO-1: the optimizer's norm has %zu partial sums, the shards %zu",
              vkg_adamw_norm_parts(opt), z->nparts);
    return VKG_OK;
}

vkg_status vkg__shards_norm(vkg_shards *z, vkg_group_t *g, vkg_adamw *opt, float *sumsq, double *ms)
{
    VKG_TRY(vkg_adamw_grad_partials(opt, z->parts));
    double t0 = vkg_os_now_ms();
    VKG_TRY(vkg_group_allgather(g, z->parts, z->most * sizeof *z->parts, z->gathered));
    *ms = vkg_os_now_ms() - t0;
    for (int q = 0; q < z->N; q++)
        memcpy(z->all + z->pbounds[q], z->gathered + (size_t)q * z->most,
               (z->pbounds[q + 1] - z->pbounds[q]) * sizeof *z->all);
    return vkg_adamw_sum_partials(opt, z->all, sumsq);
}

vkg_status vkg__shards_share(const vkg_shards *z, vkg_group_t *g, float *x)
{
    return vkg_group_allgatherv(g, x, z->bounds[z->N], z->bounds, VKG_COMM_F32);
}

void vkg__shards_tied(const vkg_shards *z, size_t count, size_t *lo, size_t *hi)
{
    size_t a = z->bounds[z->me], b = z->bounds[z->me + 1];
    *lo = a < count ? a : count;
    *hi = b < count ? b : count;
}
