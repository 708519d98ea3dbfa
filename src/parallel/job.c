/* The job: the rank's communicator, its layout and groups, its share of every global
 * micro-batch, agreement checks and the job-wide collectives (see job.h). Does not print, does
 * not know the model. */
#include "parallel/job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "os/clock.h"
#include "os/thread.h"

#define GROUP_DP 1
#define GROUP_PIPE 2
#define GROUP_TIE 3
#define GROUP_WORLD 4

struct vkg_job {
    vkg_comm_t *comm;              /* NULL alone */
    vkg_job_layout lay;            /* rank, world, pp, dp, stage, replica */
    int rank, world;               /* lay's, kept short */
    int dpr, dpw;                  /* lay.replica, lay.dp */
    vkg_group_t *dpg, *pipe, *tie; /* the pipeline's groups (NULL without) */
    vkg_group_t *all;              /* the whole job (NULL alone) */
    /* A background exchange (vkg_job_background) and its outcome. */
    vkg_os_thread *bg;
    vkg_status (*bg_fn)(void *arg);
    void *bg_arg;
    vkg_status bg_st;
    char bg_msg[1024];
    int batch[VKG_JOB_MAX_RANKS];
    int global_batch, row_offset, equal;
    int balanced; /* --rank-batch auto: the split may change, every rank reads whole batches */
    int32_t *scratch_in, *scratch_tgt; /* (G, T) for unequal batches */
    size_t scratch_tokens;
    char list[256];
};

vkg_status vkg_job_layout_of(int world, int rank, int pp, vkg_job_layout *out)
{
    pp = pp > 1 ? pp : 1;
    VKG_CHECK(world >= 1 && world <= VKG_JOB_MAX_RANKS && rank >= 0 && rank < world,
              VKG_ERR_INVALID_ARG,
              "data parallel: rank %d of world size %d is out of range "
              "(world size 1..%d)",
              rank, world, VKG_JOB_MAX_RANKS);
    VKG_CHECK(world % pp == 0, VKG_ERR_INVALID_ARG,
              "--pp %d does not divide the %d ranks: give a number of ranks that is a multiple "
              "of --pp (data-parallel groups = ranks / pp)",
              pp, world);
    int dp = world / pp; /* ranks stage by stage: stage * dp + replica */
    *out = (vkg_job_layout){
        .world = world, .rank = rank, .pp = pp, .dp = dp, .stage = rank / dp, .replica = rank % dp};
    return VKG_OK;
}

int vkg_job_rank_of(const vkg_job_layout *l, int stage, int replica)
{
    return stage * l->dp + replica;
}

/* The pipeline's groups of this rank (pp > 1): its stage's data-parallel group, its replica's
 * pipeline and, on the first and last stage, their tie. */
static vkg_status create_groups(vkg_job *d)
{
    const vkg_job_layout *l = &d->lay;
    int ranks[VKG_JOB_MAX_RANKS];
    for (int i = 0; i < l->dp; i++)
        ranks[i] = vkg_job_rank_of(l, l->stage, i);
    if (l->dp > 1)
        VKG_TRY(vkg_group_create(d->comm, ranks, l->dp, GROUP_DP, &d->dpg));
    for (int i = 0; i < l->pp; i++)
        ranks[i] = vkg_job_rank_of(l, i, l->replica);
    VKG_TRY(vkg_group_create(d->comm, ranks, l->pp, GROUP_PIPE, &d->pipe));
    int pair[2] = {vkg_job_rank_of(l, 0, l->replica), vkg_job_rank_of(l, l->pp - 1, l->replica)};
    if (l->stage == 0 || l->stage == l->pp - 1)
        VKG_TRY(vkg_group_create(d->comm, pair, 2, GROUP_TIE, &d->tie));
    return VKG_OK;
}

/* The rows before this rank, the global batch, whether all are equal and the list, from batch[]. */
static void set_split(vkg_job *d)
{
    size_t len = 0;
    d->row_offset = d->global_batch = 0, d->equal = !d->balanced;
    d->list[0] = '\0';
    for (int k = 0; k < d->dpw; k++) {
        if (k < d->dpr)
            d->row_offset += d->batch[k];
        d->global_batch += d->batch[k];
        d->equal &= d->batch[k] == d->batch[0];
        if (len + 16 < sizeof d->list)
            len += (size_t)snprintf(d->list + len, sizeof d->list - len, "%s%d", k ? "," : "",
                                    d->batch[k]);
    }
}

vkg_status vkg_job_create(const vkg_comm_config *comm, int pp, int batch, const int *rank_batch,
                          int rank_batch_count, vkg_job **out)
{
    vkg_job_layout lay;
    VKG_TRY(vkg_job_layout_of(comm ? comm->world_size : 1, comm ? comm->rank : 0, pp, &lay));
    int dpw = lay.dp;
    VKG_CHECK(!rank_batch || rank_batch_count == dpw, VKG_ERR_INVALID_ARG,
              "--rank-batch lists %d micro-batch sizes for %d data-parallel ranks%s",
              rank_batch_count, dpw, lay.pp > 1 ? " (ranks / --pp)" : "");
    vkg_job *d = calloc(1, sizeof *d);
    VKG_CHECK(d, VKG_ERR_NOMEM, "no memory for the job");
    d->lay = lay, d->equal = 1;
    d->rank = lay.rank, d->world = lay.world, d->dpw = lay.dp, d->dpr = lay.replica;
    for (int k = 0; k < dpw; k++) {
        d->batch[k] = rank_batch ? rank_batch[k] : batch;
        if (d->batch[k] <= 0) {
            free(d);
            return VKG_FAIL(VKG_ERR_INVALID_ARG,
                            "micro-batch of rank %d must be > 0, got %d "
                            "(--batch / --rank-batch)",
                            k, rank_batch ? rank_batch[k] : batch);
        }
    }
    set_split(d);
    vkg_status st = VKG_OK;
    if (d->world > 1)
        st = vkg_comm_create(comm, &d->comm);
    if (st == VKG_OK && d->comm)
        st = vkg_group_world(d->comm, GROUP_WORLD, &d->all);
    if (st == VKG_OK && lay.pp > 1)
        st = create_groups(d);
    if (st != VKG_OK) {
        vkg_job_destroy(&d, NULL);
        return st;
    }
    *out = d;
    return VKG_OK;
}

void vkg_job_balance_on(vkg_job *d)
{
    d->balanced = 1;
    set_split(d);
}

vkg_status vkg_job_set_batches(vkg_job *d, const int *batches)
{
    long long sum = 0;
    for (int k = 0; k < d->dpw; k++) {
        VKG_CHECK(batches[k] > 0, VKG_ERR_INVALID_ARG,
                  "--rank-batch auto: rank %d's micro-batch must be > 0, got %d", k, batches[k]);
        sum += batches[k];
    }
    VKG_CHECK(d->balanced && sum == d->global_batch, VKG_ERR_STATE,
              "--rank-batch auto: a new split must keep the global micro-batch of %d rows "
              "(got %lld)%s",
              d->global_batch, sum, d->balanced ? "" : " and the job must be balanced");
    memcpy(d->batch, batches, (size_t)d->dpw * sizeof *batches);
    set_split(d);
    return VKG_OK;
}

int vkg_job_balanced(const vkg_job *d)
{
    return d->balanced;
}

/* The time of rank k with b rows at `speed` rows per unit of time. */
static double rank_time(int b, double speed)
{
    return (double)b / speed;
}

vkg_status vkg_job_balance(int G, int n, const double *speed, const int *cap, int *out)
{
    VKG_CHECK(n >= 1 && n <= VKG_JOB_MAX_RANKS && G >= n, VKG_ERR_INVALID_ARG,
              "--rank-batch auto: %d rows cannot give each of %d ranks one", G, n);
    long long room = 0;
    for (int k = 0; k < n; k++) {
        VKG_CHECK(speed[k] > 0.0 && speed[k] < 1e300, VKG_ERR_INVALID_ARG,
                  "--rank-batch auto: rank %d's measured speed %g is not a positive number", k,
                  speed[k]);
        VKG_CHECK(cap[k] >= 1, VKG_ERR_NOMEM,
                  "--rank-batch auto: rank %d's device fits no micro-batch (vkgpt plan)", k);
        room += cap[k];
        out[k] = 1;
    }
    VKG_CHECK(room >= G, VKG_ERR_NOMEM,
              "--rank-batch auto: the ranks' devices fit %lld rows in all, fewer than the "
              "global micro-batch of %d (vkgpt plan gives each device's largest --batch)",
              room, G);
    /* Each further row to the rank that would finish it soonest; ties to the lower rank. */
    for (int r = n; r < G; r++) {
        int best = -1;
        double best_t = 0.0;
        for (int k = 0; k < n; k++) {
            double tk = rank_time(out[k] + 1, speed[k]);
            if (out[k] < cap[k] && (best < 0 || tk < best_t))
                best = k, best_t = tk;
        }
        out[best]++;
    }
    return VKG_OK;
}

void vkg_job_abort(vkg_job *d, const char *why)
{
    (void)vkg_job_settle(d, NULL); /* the background exchange ends before the peers are told */
    if (d->comm && why)
        vkg_comm_abort(d->comm, why[0] ? why : "(no message was recorded)");
}

void vkg_job_destroy(vkg_job **pd, const char *failure)
{
    vkg_job *d = pd ? *pd : NULL;
    if (!d)
        return;
    (void)vkg_job_settle(d, NULL); /* the communicator serves one thread at a time */
    vkg_job_abort(d, failure);
    vkg_group_destroy(&d->dpg), vkg_group_destroy(&d->pipe), vkg_group_destroy(&d->tie);
    vkg_group_destroy(&d->all);
    vkg_comm_destroy(&d->comm);
    free(d->scratch_in);
    free(d->scratch_tgt);
    free(d);
    *pd = NULL;
}

int vkg_job_rank(const vkg_job *d)
{
    return d->rank;
}
int vkg_job_world(const vkg_job *d)
{
    return d->world;
}
int vkg_job_rank_batch(const vkg_job *d)
{
    return d->batch[d->dpr];
}
int vkg_job_replica(const vkg_job *d)
{
    return d->dpr;
}
int vkg_job_dp(const vkg_job *d)
{
    return d->dpw;
}
int vkg_job_pp(const vkg_job *d)
{
    return d->lay.pp;
}
int vkg_job_stage(const vkg_job *d)
{
    return d->lay.stage;
}
const vkg_job_layout *vkg_job_layout_get(const vkg_job *d)
{
    return &d->lay;
}
vkg_group_t *vkg_job_dp_group(vkg_job *d)
{
    return d->lay.pp > 1 ? d->dpg : d->all;
}
vkg_group_t *vkg_job_world_group(vkg_job *d)
{
    return d->all;
}
vkg_group_t *vkg_job_pipe_group(vkg_job *d)
{
    return d->pipe;
}
vkg_group_t *vkg_job_tie_group(vkg_job *d)
{
    return d->tie;
}
vkg_comm_t *vkg_job_comm(vkg_job *d)
{
    return d->comm;
}
int vkg_job_global_batch(const vkg_job *d)
{
    return d->global_batch;
}

int vkg_job_batch_of(const vkg_job *d, int k)
{
    return d->batch[k];
}

int vkg_job_max_rank_batch(const vkg_job *d)
{
    int mx = 0;
    for (int k = 0; k < d->dpw; k++)
        mx = d->batch[k] > mx ? d->batch[k] : mx;
    return mx;
}

static void *bg_main(void *arg)
{
    vkg_job *d = arg;
    d->bg_st = d->bg_fn(d->bg_arg);
    if (d->bg_st != VKG_OK) /* the message is this thread's: keep it for the settling call */
        snprintf(d->bg_msg, sizeof d->bg_msg, "%s", vkg_error_message());
    return NULL;
}

vkg_status vkg_job_background(vkg_job *d, vkg_status (*fn)(void *arg), void *arg, int *ran)
{
    VKG_TRY(vkg_job_settle(d, NULL));
    d->bg_fn = fn, d->bg_arg = arg, d->bg_st = VKG_OK;
    *ran = vkg_os_thread_start(&d->bg, bg_main, d) != 0;
    if (*ran) { /* no thread: it runs now */
        d->bg = NULL;
        return fn(arg);
    }
    return VKG_OK;
}

vkg_status vkg_job_settle(vkg_job *d, double *waited_ms)
{
    double t0 = vkg_os_now_ms();
    if (waited_ms)
        *waited_ms = 0.0;
    if (!d->bg)
        return VKG_OK;
    vkg_os_thread_join(d->bg, NULL);
    d->bg = NULL;
    if (waited_ms)
        *waited_ms = vkg_os_now_ms() - t0;
    if (d->bg_st == VKG_OK)
        return VKG_OK;
    vkg_status st = d->bg_st;
    d->bg_st = VKG_OK;
    vkg__error_restore(d->bg_msg);
    return st;
}

vkg_status vkg_job_allgather(vkg_job *d, const void *send, size_t bytes, void *recv)
{
    VKG_TRY(vkg_job_settle(d, NULL));
    if (!d->comm) {
        memcpy(recv, send, bytes);
        return VKG_OK;
    }
    return vkg_group_allgather(d->all, send, bytes, recv);
}
const char *vkg_job_batch_list(const vkg_job *d)
{
    return d->list;
}

uint64_t vkg_job_batch_hash(const vkg_job *d)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over the sizes */
    for (int k = 0; k < d->dpw; k++)
        h = (h ^ (uint64_t)(uint32_t)d->batch[k]) * 0x100000001b3ull;
    return h;
}

float vkg_job_loss_scale(const vkg_job *d)
{
    return d->dpw == 1 ? 1.0f : (float)d->batch[d->dpr] / (float)d->global_batch;
}

void vkg_job_data_config(const vkg_job *d, vkg_data_config *dc)
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
static vkg_status read_rows(vkg_job *d, vkg_data_t *data, int64_t g, int T, int32_t *inputs,
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

vkg_status vkg_job_data_next(vkg_job *d, vkg_data_t *data, int T, int32_t *inputs, int32_t *targets)
{
    if (d->equal)
        return vkg_data_next(data, inputs, targets);
    return read_rows(d, data, -1, T, inputs, targets);
}

vkg_status vkg_job_data_read(vkg_job *d, vkg_data_t *data, uint64_t g, int T, int32_t *inputs,
                             int32_t *targets)
{
    if (d->equal)
        return vkg_data_read_batch(data, g, inputs, targets);
    return read_rows(d, data, (int64_t)g, T, inputs, targets);
}

vkg_status vkg_job_check_match(vkg_job *d, const vkg_job_fingerprint *fp, const char *const *names,
                               int count)
{
    VKG_TRY(vkg_job_settle(d, NULL));
    if (!d->comm)
        return VKG_OK;
    VKG_CHECK(count > 0 && count <= (int)(sizeof fp->v / sizeof fp->v[0]), VKG_ERR_INVALID_ARG,
              "fingerprint of %d fields", count);
    vkg_job_fingerprint *all = malloc((size_t)d->world * sizeof *all);
    VKG_CHECK(all, VKG_ERR_NOMEM, "no memory for %d fingerprints", d->world);
    vkg_status st = vkg_group_allgather(d->all, fp, sizeof *fp, all);
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

vkg_status vkg_job_broadcast(vkg_job *d, void *buf, size_t bytes)
{
    VKG_TRY(vkg_job_settle(d, NULL));
    return d->all ? vkg_group_broadcast(d->all, buf, bytes, 0) : VKG_OK;
}

vkg_status vkg_job_allreduce_sum(vkg_job *d, float *buf, size_t n)
{
    VKG_TRY(vkg_job_settle(d, NULL));
    return d->all ? vkg_group_allreduce(d->all, buf, n, VKG_COMM_F32) : VKG_OK;
}
