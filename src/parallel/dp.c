/* Data parallelism: the rank's communicator, its share of every global micro-batch, agreement
 * checks and the gradient allreduce (see dp.h). Does not print, does not know the model. */
#include "parallel/dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

struct vkg_dp {
    vkg_comm_t *comm; /* NULL alone */
    int rank, world;  /* in the job */
    int pp;           /* pipeline stages: the job is pp data-parallel groups of dpw ranks */
    int dpr, dpw;     /* this rank's place in its data-parallel group, and the group's size */
    int batch[VKG_DP_MAX_RANKS];
    int global_batch, row_offset, equal;
    int32_t *scratch_in, *scratch_tgt; /* (G, T) for unequal batches */
    size_t scratch_tokens;
    char list[256];
};

vkg_status vkg_dp_create(const vkg_comm_config *comm, int pp, int batch, const int *rank_batch,
                         int rank_batch_count, vkg_dp **out)
{
    int world = comm ? comm->world_size : 1, rank = comm ? comm->rank : 0;
    VKG_CHECK(world >= 1 && world <= VKG_DP_MAX_RANKS && rank >= 0 && rank < world,
              VKG_ERR_INVALID_ARG,
              "data parallel: rank %d of world size %d is out of range "
              "(world size 1..%d)",
              rank, world, VKG_DP_MAX_RANKS);
    VKG_CHECK(pp >= 1 && world % pp == 0, VKG_ERR_INVALID_ARG,
              "--pp %d does not divide the %d ranks: give a number of ranks that is a multiple "
              "of --pp (data-parallel groups = ranks / pp)",
              pp, world);
    int dpw = world / pp;
    VKG_CHECK(!rank_batch || rank_batch_count == dpw, VKG_ERR_INVALID_ARG,
              "--rank-batch lists %d micro-batch sizes for %d data-parallel ranks%s",
              rank_batch_count, dpw, pp > 1 ? " (ranks / --pp)" : "");
    vkg_dp *d = calloc(1, sizeof *d);
    VKG_CHECK(d, VKG_ERR_NOMEM, "no memory for the data-parallel state");
    d->rank = rank, d->world = world, d->equal = 1;
    d->pp = pp, d->dpw = dpw, d->dpr = rank % dpw; /* ranks stage by stage: s * dpw + r */
    size_t len = 0;
    for (int k = 0; k < dpw; k++) {
        d->batch[k] = rank_batch ? rank_batch[k] : batch;
        if (d->batch[k] <= 0) {
            free(d);
            return VKG_FAIL(VKG_ERR_INVALID_ARG,
                            "micro-batch of rank %d must be > 0, got %d "
                            "(--batch / --rank-batch)",
                            k, rank_batch ? rank_batch[k] : batch);
        }
        if (k < d->dpr)
            d->row_offset += d->batch[k];
        d->global_batch += d->batch[k];
        d->equal &= d->batch[k] == d->batch[0];
        if (len + 16 < sizeof d->list)
            len += (size_t)snprintf(d->list + len, sizeof d->list - len, "%s%d", k ? "," : "",
                                    d->batch[k]);
    }
    if (world > 1) {
        vkg_status st = vkg_comm_create(comm, &d->comm);
        if (st != VKG_OK) {
            free(d);
            return st;
        }
    }
    *out = d;
    return VKG_OK;
}

void vkg_dp_abort(vkg_dp *d, const char *why)
{
    if (d->comm && why)
        vkg_comm_abort(d->comm, why[0] ? why : "(no message was recorded)");
}

void vkg_dp_destroy(vkg_dp **pd, const char *failure)
{
    vkg_dp *d = pd ? *pd : NULL;
    if (!d)
        return;
    vkg_dp_abort(d, failure);
    vkg_comm_destroy(&d->comm);
    free(d->scratch_in);
    free(d->scratch_tgt);
    free(d);
    *pd = NULL;
}

int vkg_dp_rank(const vkg_dp *d)
{
    return d->rank;
}
int vkg_dp_world(const vkg_dp *d)
{
    return d->world;
}
int vkg_dp_rank_batch(const vkg_dp *d)
{
    return d->batch[d->dpr];
}
int vkg_dp_group_rank(const vkg_dp *d)
{
    return d->dpr;
}
int vkg_dp_group_size(const vkg_dp *d)
{
    return d->dpw;
}
int vkg_dp_pp(const vkg_dp *d)
{
    return d->pp;
}
vkg_comm_t *vkg_dp_comm(vkg_dp *d)
{
    return d->comm;
}
int vkg_dp_global_batch(const vkg_dp *d)
{
    return d->global_batch;
}

int vkg_dp_max_rank_batch(const vkg_dp *d)
{
    int mx = 0;
    for (int k = 0; k < d->dpw; k++)
        mx = d->batch[k] > mx ? d->batch[k] : mx;
    return mx;
}

vkg_status vkg_dp_allgather(vkg_dp *d, const void *send, size_t bytes, void *recv)
{
    if (!d->comm) {
        memcpy(recv, send, bytes);
        return VKG_OK;
    }
    return vkg_comm_allgather(d->comm, send, bytes, recv);
}
const char *vkg_dp_batch_list(const vkg_dp *d)
{
    return d->list;
}

uint64_t vkg_dp_batch_hash(const vkg_dp *d)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over the sizes */
    for (int k = 0; k < d->dpw; k++)
        h = (h ^ (uint64_t)(uint32_t)d->batch[k]) * 0x100000001b3ull;
    return h;
}

float vkg_dp_loss_scale(const vkg_dp *d)
{
    return d->dpw == 1 ? 1.0f : (float)d->batch[d->dpr] / (float)d->global_batch;
}

void vkg_dp_data_config(const vkg_dp *d, vkg_data_config *dc)
{
    if (d->equal) {
        dc->batch_size = d->batch[d->dpr];
        dc->rank = d->dpr, dc->world_size = d->dpw;
    } else {
        dc->batch_size = d->global_batch;
        dc->rank = 0, dc->world_size = 1;
    }
}

/* Unequal batches: the whole global micro-batch in scratch, then this rank's rows. */
static vkg_status read_rows(vkg_dp *d, vkg_data_t *data, int64_t g, int T, int32_t *inputs,
                            int32_t *targets)
{
    size_t need = (size_t)d->global_batch * (size_t)T;
    if (d->scratch_tokens < need) {
        free(d->scratch_in);
        free(d->scratch_tgt);
        d->scratch_in = malloc(need * sizeof *d->scratch_in);
        d->scratch_tgt = malloc(need * sizeof *d->scratch_tgt);
        d->scratch_tokens = d->scratch_in && d->scratch_tgt ? need : 0;
        VKG_CHECK(d->scratch_tokens, VKG_ERR_NOMEM, "no memory for a global batch of %zu tokens",
                  need);
    }
    if (g < 0)
        VKG_TRY(vkg_data_next(data, d->scratch_in, d->scratch_tgt));
    else
        VKG_TRY(vkg_data_read_batch(data, (uint64_t)g, d->scratch_in, d->scratch_tgt));
    size_t off = (size_t)d->row_offset * (size_t)T, n = (size_t)d->batch[d->dpr] * (size_t)T;
    memcpy(inputs, d->scratch_in + off, n * sizeof *inputs);
    memcpy(targets, d->scratch_tgt + off, n * sizeof *targets);
    return VKG_OK;
}

vkg_status vkg_dp_data_next(vkg_dp *d, vkg_data_t *data, int T, int32_t *inputs, int32_t *targets)
{
    if (d->equal)
        return vkg_data_next(data, inputs, targets);
    return read_rows(d, data, -1, T, inputs, targets);
}

vkg_status vkg_dp_data_read(vkg_dp *d, vkg_data_t *data, uint64_t g, int T, int32_t *inputs,
                            int32_t *targets)
{
    if (d->equal)
        return vkg_data_read_batch(data, g, inputs, targets);
    return read_rows(d, data, (int64_t)g, T, inputs, targets);
}

vkg_status vkg_dp_check_match(vkg_dp *d, const vkg_dp_fingerprint *fp, const char *const *names,
                              int count)
{
    if (!d->comm)
        return VKG_OK;
    VKG_CHECK(count > 0 && count <= (int)(sizeof fp->v / sizeof fp->v[0]), VKG_ERR_INVALID_ARG,
              "fingerprint of %d fields", count);
    vkg_dp_fingerprint *all = malloc((size_t)d->world * sizeof *all);
    VKG_CHECK(all, VKG_ERR_NOMEM, "no memory for %d fingerprints", d->world);
    vkg_status st = vkg_comm_allgather(d->comm, fp, sizeof *fp, all);
    for (int k = 1; st == VKG_OK && k < d->world; k++)
        for (int i = 0; i < count; i++)
            if (all[k].v[i] != all[0].v[i]) {
                st = VKG_FAIL(VKG_ERR_MISMATCH,
                              "data-parallel rank %d does not match rank 0: "
                              "%s is %llu there but %llu on rank 0 (every rank needs the same "
                              "model, data and training flags)",
                              k, names[i], (unsigned long long)all[k].v[i],
                              (unsigned long long)all[0].v[i]);
                break;
            }
    free(all);
    return st;
}

vkg_status vkg_dp_broadcast(vkg_dp *d, void *buf, size_t bytes)
{
    return d->comm ? vkg_comm_broadcast(d->comm, buf, bytes, 0) : VKG_OK;
}

vkg_status vkg_dp_allreduce_sum(vkg_dp *d, float *buf, size_t n)
{
    return d->comm ? vkg_comm_allreduce(d->comm, buf, buf, n, VKG_COMM_F32, VKG_COMM_SUM) : VKG_OK;
}

vkg_status vkg_dp_allreduce_grads(vkg_dp *d, float *grads, size_t n)
{
    return vkg_dp_allreduce_sum(d, grads, n);
}
