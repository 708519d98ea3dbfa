/* The trainer's data-parallel hooks (declared in train/trainer_internal.h): joining the job,
 * handing rank 0's starting point (new, loaded or resumed) to every rank, checking that ranks
 * agree, resuming across world sizes, and the per-step gradient and loss reductions.
 * Not here: the transport (transport/), the data split and weighting rules (dp.c). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "parallel/dp.h"
#include "train/trainer_internal.h"

vkg_status vkg__dp_join(vkg_trainer_t *t)
{
    const vkg_train_config *c = &t->cfg;
    vkg_comm_config cc = c->comm;
    if (c->comm_from_env) {
        VKG_TRY(vkg_comm_config_from_env(&cc, NULL));
        cc.ctx = c->comm.ctx;
    }
    return vkg_dp_create(&cc, c->batch, c->rank_batch, c->rank_batch_count, &t->dp);
}

/* What rank 0 hands every rank before the model exists. */
typedef struct start_header {
    vkg_gpt2_config cfg;
    int32_t resumed;
    vkg_checkpoint_state state;
} start_header;

vkg_status vkg__dp_share_start(vkg_trainer_t *t, float **params, vkg_checkpoint *ck)
{
    if (vkg_dp_world(t->dp) == 1)
        return VKG_OK;
    start_header h;
    memset(&h, 0, sizeof h);
    if (vkg_dp_rank(t->dp) == 0) {
        h.cfg = t->mcfg, h.resumed = t->resumed;
        if (t->resumed)
            h.state = ck->state;
    }
    VKG_TRY(vkg_dp_broadcast(t->dp, &h, sizeof h));
    if (vkg_dp_rank(t->dp) == 0 || !h.resumed)
        return VKG_OK;
    /* Resuming: rank 0's checkpoint decides the model; parameters and moments follow later. */
    size_t n = vkg_gpt2_num_params(&h.cfg);
    float *p = malloc(n * sizeof *p);
    ck->m = malloc(n * sizeof *ck->m), ck->v = malloc(n * sizeof *ck->v);
    if (!p || !ck->m || !ck->v) {
        free(p);
        return VKG_FAIL(VKG_ERR_NOMEM, "no memory for %zu resumed parameters", n);
    }
    free(*params);
    *params = p;
    t->mcfg = ck->cfg = h.cfg;
    ck->num_params = n;
    ck->state = h.state;
    t->resumed = 1;
    return VKG_OK;
}

#define BUCKET_DEFAULT ((size_t)25 << 20)

static const char *const fp_names[] = {
    "max_seq_len",
    "vocab_size",
    "padded_vocab_size",
    "layers",
    "heads",
    "channels",
    "seq (T)",
    "total batch (tokens)",
    "global micro-batch (rows)",
    "world size",
    "seed",
    "shuffle",
    "steps",
    "lr (bits)",
    "schedule",
    "warmup",
    "grad clip and weight decay (bits)",
    "training batches per epoch",
    "training tokens",
    "resumed step",
    "training data checksum",
    "--rank-batch list (hash)",
    "gradient bucket bytes (0: --no-overlap)",
};

static uint64_t fbits(float a, float b)
{
    uint32_t x, y;
    memcpy(&x, &a, 4), memcpy(&y, &b, 4);
    return (uint64_t)x << 32 | y;
}

vkg_status vkg__dp_agree(vkg_trainer_t *t, float *params, vkg_checkpoint *ck)
{
    if (vkg_dp_world(t->dp) == 1)
        return VKG_OK;
    const vkg_train_config *c = &t->cfg;
    vkg_dp_fingerprint fp;
    memset(&fp, 0, sizeof fp);
    uint64_t *v = fp.v;
    v[0] = (uint64_t)t->mcfg.max_seq_len, v[1] = (uint64_t)t->mcfg.vocab_size;
    v[2] = (uint64_t)t->mcfg.padded_vocab_size, v[3] = (uint64_t)t->mcfg.num_layers;
    v[4] = (uint64_t)t->mcfg.num_heads, v[5] = (uint64_t)t->mcfg.channels;
    v[6] = (uint64_t)t->mopts.T, v[7] = t->hp.total_batch;
    v[8] = (uint64_t)vkg_dp_global_batch(t->dp), v[9] = (uint64_t)vkg_dp_world(t->dp);
    v[10] = c->seed, v[11] = (uint64_t)c->shuffle, v[12] = (uint64_t)c->steps;
    v[13] = fbits(t->sched.lr, t->sched.lr_min_frac), v[14] = (uint64_t)t->sched.kind;
    v[15] = (uint64_t)t->sched.warmup, v[16] = fbits(c->grad_clip, c->weight_decay);
    v[17] = t->train ? vkg_data_num_batches(t->train) : 0;
    v[18] = t->train ? vkg_data_num_tokens(t->train) : 0;
    v[19] = t->resumed ? ck->state.step : 0;
    v[20] = t->train ? vkg_data_checksum(t->train) : 0;
    v[21] = vkg_dp_batch_hash(t->dp);
    v[22] = c->bucket_bytes < 0 ? 0 : c->bucket_bytes ? (uint64_t)c->bucket_bytes : BUCKET_DEFAULT;
    VKG_TRY(vkg_dp_check_match(t->dp, &fp, fp_names, 23));
    /* Everyone starts from rank 0's parameters (and moments when resuming). */
    size_t n = vkg_gpt2_num_params(&t->mcfg);
    VKG_TRY(vkg_dp_broadcast(t->dp, params, n * sizeof *params));
    if (t->resumed) {
        VKG_TRY(vkg_dp_broadcast(t->dp, ck->m, n * sizeof *ck->m));
        VKG_TRY(vkg_dp_broadcast(t->dp, ck->v, n * sizeof *ck->v));
    }
    t->dp_grads = malloc(n * sizeof *t->dp_grads);
    VKG_CHECK(t->dp_grads, VKG_ERR_NOMEM, "no memory for %zu gradients", n);
    if (c->bucket_bytes >= 0) {
        size_t bytes = c->bucket_bytes ? (size_t)c->bucket_bytes : BUCKET_DEFAULT;
        VKG_TRY(vkg_gpt2_set_buckets(t->model, bytes));
        t->dp_overlap = 1;
    }
    return VKG_OK;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Notes when the device has finished the whole backward pass (for the exposed-time figure). */
typedef struct finish_watch {
    vkg_gpt2 *model;
    double done_ms;
    vkg_status st;
} finish_watch;

static void *watch_finish(void *p)
{
    finish_watch *w = p;
    w->st = vkg_gpt2_bucket_idle_wait(w->model);
    w->done_ms = now_ms();
    return NULL;
}

/* wte's embedding rows were left out of the bucketed backward, so that wte could be reduced
 * first: every rank sums the rows of its encoder-output gradient per distinct token of its last
 * micro-batch (in position order, ascending tokens), sends them to all, and every rank adds all
 * ranks' rows to the reduced wte gradient `wte` (Vp x C, host) in rank order, so that all ranks
 * stay bitwise equal. */
static vkg_status add_embedding_rows(vkg_trainer_t *t, float *wte)
{
    size_t C = (size_t)t->mcfg.channels, V = (size_t)t->mcfg.vocab_size;
    size_t n = (size_t)vkg_dp_rank_batch(t->dp) * (size_t)t->mopts.T;
    size_t rmax = (size_t)vkg_dp_max_rank_batch(t->dp) * (size_t)t->mopts.T;
    size_t rec = (1 + rmax) * sizeof(int32_t) + rmax * C * sizeof(float);
    int W = vkg_dp_world(t->dp);
    int32_t *slot = malloc(V * sizeof *slot);
    unsigned char *send = calloc(1, rec), *all = malloc((size_t)W * rec);
    float *denc = malloc(n * C * sizeof *denc);
    int *pos = calloc((size_t)W, sizeof *pos);
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, slot && send && all && denc && pos, VKG_ERR_NOMEM, done,
                   "no memory for %zu embedding-row gradients", rmax);
    VKG_TRY_GOTO(st, vkg_gpt2_encoded_grad_read(t->model, denc), done);
    int32_t *count = (int32_t *)send, *ids = count + 1;
    float *rows = (float *)(ids + rmax);
    for (size_t id = 0; id < V; id++)
        slot[id] = -1;
    for (size_t i = 0; i < n; i++)
        slot[t->inputs[i]] = 0;
    for (size_t id = 0; id < V; id++)
        if (slot[id] == 0) {
            slot[id] = *count;
            ids[(*count)++] = (int32_t)id;
        }
    for (size_t i = 0; i < n; i++) { /* positions in order: each row sums in position order */
        float *row = rows + (size_t)slot[t->inputs[i]] * C;
        const float *d = denc + i * C;
        for (size_t c = 0; c < C; c++)
            row[c] += d[c];
    }
    VKG_TRY_GOTO(st, vkg_dp_allgather(t->dp, send, rec, all), done);
    for (size_t id = 0; id < V; id++) { /* every token any rank saw, ranks in order */
        float *row = wte + id * C;
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

/* The last micro-step with the allreduce overlapped: each bucket is read as soon as the device
 * has finished it and reduced while the device goes on with the backward pass; every bucket but
 * the first is handed back at once; the first (wte's classifier gradient) waits for the
 * embedding rows of the whole job. The trainer's thread is the communication thread: once the
 * step is submitted it has nothing else to do but wait for buckets and reduce them. */
vkg_status vkg__dp_backward_overlapped(vkg_trainer_t *t, float *loss)
{
    vkg_gpt2 *m = t->model;
    const size_t(*r0)[2];
    VKG_CHECK(vkg_gpt2_bucket_ranges(m, 0, &r0) > 0 && r0[0][0] == 0, VKG_ERR_STATE,
              "the first gradient bucket does not start with wte");
    VKG_TRY(vkg_gpt2_forward_backward_submit(m, t->inputs, t->targets));
    finish_watch w = {.model = m};
    pthread_t th;
    int watching = pthread_create(&th, NULL, watch_finish, &w) == 0;
    vkg_status st = VKG_OK;
    double comm = 0.0, end = 0.0;
    size_t base = 0;
    for (int k = 0; st == VKG_OK && k < vkg_gpt2_bucket_count(m); k++) {
        float *buf = t->dp_grads + base;
        size_t n = vkg_gpt2_bucket_floats(m, k);
        st = vkg_gpt2_bucket_wait(m, k);
        if (st == VKG_OK)
            st = vkg_gpt2_bucket_read(m, k, buf);
        double t0 = now_ms();
        if (st == VKG_OK)
            st = vkg_dp_allreduce_grads(t->dp, buf, n);
        end = now_ms();
        comm += end - t0;
        if (st == VKG_OK && k > 0)
            st = vkg_gpt2_bucket_write(m, k, buf);
        base += n;
    }
    if (st == VKG_OK)
        st = vkg_gpt2_bucket_finish(m, loss);
    if (st == VKG_OK) {
        double t0 = now_ms();
        st = add_embedding_rows(t, t->dp_grads);
        end = now_ms();
        comm += end - t0;
    }
    if (st == VKG_OK)
        st = vkg_gpt2_bucket_write(m, 0, t->dp_grads);
    if (st == VKG_OK)
        st = vkg_gpt2_bucket_commit(m);
    if (watching)
        pthread_join(th, NULL);
    VKG_TRY(st);
    VKG_TRY(w.st);
    t->dp_comm_ms = comm;
    t->dp_exposed_ms = watching && end > w.done_ms ? end - w.done_ms : 0.0;
    if (t->dp_exposed_ms > comm)
        t->dp_exposed_ms = comm;
    return VKG_OK;
}

vkg_status vkg__dp_resume(vkg_trainer_t *t, const vkg_checkpoint_state *s)
{
    vkg_train_hparams now = t->hp;
    int regrouped = s->hp.batch_size != now.batch_size;
    /* Another world size (or split of the micro-batch) is fine while the total batch holds. */
    now.world_size = s->hp.world_size;
    now.batch_size = s->hp.batch_size;
    VKG_TRY(vkg_checkpoint_check_resume(&s->hp, &now));
    if (!t->train)
        return VKG_OK;
    vkg_data_pos pos = s->data_pos;
    if (regrouped) {
        /* The same token offset in rows of the new global micro-batch. */
        uint64_t rows = pos.batch * (uint64_t)s->hp.batch_size, G = (uint64_t)t->hp.batch_size;
        VKG_CHECK(!t->cfg.shuffle && vkg_data_num_files(t->train) == 1, VKG_ERR_MISMATCH,
                  "--resume: the checkpoint's global micro-batch was %d rows (world size %d), "
                  "now %d: with shuffling or several data files the data position cannot be "
                  "carried over; keep the global micro-batch (sum of --rank-batch, or --batch x "
                  "ranks) at %d",
                  s->hp.batch_size, s->hp.world_size, (int)G, s->hp.batch_size);
        VKG_CHECK(rows % G == 0, VKG_ERR_MISMATCH,
                  "--resume: the checkpoint stopped after %llu rows, not a multiple of the new "
                  "global micro-batch of %d rows",
                  (unsigned long long)rows, (int)G);
        pos.batch = rows / G;
        pos.num_batches = vkg_data_num_batches(t->train);
        if (pos.batch >= pos.num_batches)
            pos.batch = 0, pos.epoch++;
    }
    return vkg_data_seek(t->train, &pos);
}

vkg_status vkg__dp_reduce(vkg_trainer_t *t, double *loss, int *stop)
{
    if (vkg_dp_world(t->dp) == 1)
        return VKG_OK;
    if (!t->dp_overlap) {
        size_t n = vkg_gpt2_param_count(t->model);
        VKG_TRY(vkg_gpt2_get_grads(t->model, t->dp_grads));
        double t0 = now_ms();
        VKG_TRY(vkg_dp_allreduce_grads(t->dp, t->dp_grads, n));
        t->dp_comm_ms = t->dp_exposed_ms = now_ms() - t0;
        VKG_TRY(vkg_gpt2_set_grads(t->model, t->dp_grads));
    }
    /* The loss as a token-weighted mean, and the stop request of any rank. */
    float x[2] = {(float)(*loss * (double)vkg_dp_loss_scale(t->dp)), *stop ? 1.0f : 0.0f};
    VKG_TRY(vkg_dp_allreduce_sum(t->dp, x, 2));
    *loss = x[0];
    *stop = x[1] > 0.0f;
    return VKG_OK;
}

vkg_status vkg__dp_mean(vkg_trainer_t *t, double *value)
{
    if (vkg_dp_world(t->dp) == 1)
        return VKG_OK;
    float x = (float)(*value * (double)vkg_dp_loss_scale(t->dp));
    VKG_TRY(vkg_dp_allreduce_sum(t->dp, &x, 1));
    *value = x;
    return VKG_OK;
}

float vkg__dp_lr_factor(const vkg_train_config *c, long long total_batch)
{
    if (c->lr_scale == VKG_LR_SCALE_NONE || c->base_batch <= 0)
        return 1.0f;
    double r = (double)total_batch / (double)c->base_batch;
    return (float)(c->lr_scale == VKG_LR_SCALE_SQRT ? sqrt(r) : r);
}

vkg_status vkg__dp_rank0_outcome(vkg_trainer_t *t, vkg_status st, const char *what)
{
    if (vkg_dp_world(t->dp) == 1)
        return st;
    struct {
        int32_t status;
        char msg[1020];
    } o;
    memset(&o, 0, sizeof o);
    int rank = vkg_dp_rank(t->dp);
    if (rank == 0 && st != VKG_OK) {
        o.status = (int32_t)st;
        snprintf(o.msg, sizeof o.msg, "%s", vkg_error_message());
    }
    vkg_status bst = vkg_dp_broadcast(t->dp, &o, sizeof o);
    if (rank == 0) {
        if (st != VKG_OK) /* the failure is what matters; destroy tells the others if need be */
            vkg__error_restore(o.msg);
        return st != VKG_OK ? st : bst;
    }
    VKG_TRY(bst);
    o.msg[sizeof o.msg - 1] = '\0';
    VKG_CHECK(o.status == VKG_OK, VKG_ERR_PEER, "rank 0 failed: %s: %s", what, o.msg);
    return VKG_OK;
}
