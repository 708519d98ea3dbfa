/* The tied embedding (see tied.h): the encoder's rows of its gradient exchanged and added in a
 * fixed order under data parallelism, and the two copies' sum and the norm's count under pipelines.
 */
#include "parallel/tied.h"

#include <stdlib.h>

vkg_status vkg_tied_add_rows(vkg_job *job, vkg_model *m, const int32_t *inputs, float *emb)
{
    const vkg_param_table *t = vkg_model_table_of(m);
    VKG_CHECK(t->tied >= 0, VKG_ERR_STATE, "the model has no tied embedding");
    int T = vkg_model_opts_of(m)->T;
    size_t C = (size_t)t->t[t->tied].cols, V = (size_t)t->t[t->tied].used_rows;
    size_t n = (size_t)vkg_job_rank_batch(job) * (size_t)T;
    size_t rmax = (size_t)vkg_job_max_rank_batch(job) * (size_t)T;
    size_t rec = (1 + rmax) * sizeof(int32_t) + rmax * C * sizeof(float);
    int W = vkg_job_world(job);
    int32_t *slot = malloc(V * sizeof *slot);
    unsigned char *send = calloc(1, rec), *all = malloc((size_t)W * rec);
    float *denc = malloc(n * C * sizeof *denc);
    int *pos = calloc((size_t)W, sizeof *pos);
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, slot && send && all && denc && pos, VKG_ERR_NOMEM, done,
                   "no memory for %zu embedding-row gradients", rmax);
    VKG_TRY_GOTO(st, vkg_model_encoded_grad_read(m, denc), done);
    int32_t *count = (int32_t *)send, *ids = count + 1;
    float *rows = (float *)(ids + rmax);
    for (size_t id = 0; id < V; id++)
        slot[id] = -1;
    for (size_t i = 0; i < n; i++)
        slot[inputs[i]] = 0;
    for (size_t id = 0; id < V; id++)
        if (slot[id] == 0) {
            slot[id] = *count;
            ids[(*count)++] = (int32_t)id;
        }
    for (size_t i = 0; i < n; i++) { /* positions in order: each row sums in position order */
        float *row = rows + (size_t)slot[inputs[i]] * C;
        const float *d = denc + i * C;
        for (size_t c = 0; c < C; c++)
            row[c] += d[c];
    }
    VKG_TRY_GOTO(st, vkg_job_allgather(job, send, rec, all), done);
    for (size_t id = 0; id < V; id++) { /* every token any rank saw, ranks in order */
        float *row = emb + id * C;
        for (int r = 0; r < W; r++) {
            const int32_t *rc = (const int32_t *)(all + (size_t)r * rec);
            const float *rr = (const float *)(rc + 1 + rmax);
            if (pos[r] < rc[0] && rc[1 + pos[r]] == (int32_t)id) {
                for (size_t c = 0; c < C; c++)
                    row[c] += rr[(size_t)pos[r] * C + c];
                pos[r]++;
            }
        }
    }
done:
    free(slot), free(send), free(all), free(denc), free(pos);
    return st;
}

vkg_status vkg_tied_pipe_sum(vkg_job *job, vkg_model *m, float *grads, size_t first, size_t end)
{
    vkg_group_t *tie = vkg_job_tie_group(job);
    size_t w = vkg_model_layout_of(m)->tied;
    size_t lo = first < w ? first : w, hi = end < w ? end : w;
    if (!tie || hi <= lo) /* the copies are at the start of both the first and the last part */
        return VKG_OK;
    return vkg_group_allreduce(tie, grads + lo, hi - lo, VKG_COMM_F32);
}

vkg_status vkg_tied_count_once(vkg_job *job, vkg_model *m, vkg_adamw *opt)
{
    int pp = vkg_job_pp(job);
    if (pp == 1 || vkg_job_stage(job) != pp - 1)
        return VKG_OK;
    return vkg_adamw_norm_from(opt, vkg_model_layout_of(m)->tied);
}
