/* What the ranks of a training job share and agree on before the first step: rank 0's starting
 * point (new, loaded or resumed) handed to every rank, the check that every rank has the same
 * model, data and flags, and the data position of a resume across world sizes. Everything goes
 * through the parallel strategy's job-wide calls; with one rank they do nothing. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "train/trainer_internal.h"

/* What rank 0 hands every rank before the model exists. */
typedef struct start_header {
    vkg_model_config cfg;
    int32_t resumed;
    vkg_checkpoint_state state;
} start_header;

vkg_status vkg__train_share_start(vkg_trainer_t *t, float **params, vkg_checkpoint *ck)
{
    if (vkg_strategy_world(t->par) == 1)
        return VKG_OK;
    start_header h;
    memset(&h, 0, sizeof h);
    int rank = vkg_strategy_rank(t->par);
    if (rank == 0) {
        h.cfg = t->mcfg, h.resumed = t->resumed;
        if (t->resumed)
            h.state = ck->state;
    }
    VKG_TRY(vkg_strategy_broadcast(t->par, &h, sizeof h));
    if (rank != 0 && !h.resumed && t->cfg.resume) /* --resume found nothing: start afresh */
        return vkg__train_new_model(t, params);
    if (rank == 0 || !h.resumed) /* a new model: every rank's own config, checked in agree */
        return VKG_OK;
    /* Resuming: rank 0's checkpoint decides the model; parameters and moments follow later. */
    size_t n = vkg_model_num_params(&h.cfg);
    float *p = malloc(n * sizeof *p);
    VKG_CHECK(p, VKG_ERR_NOMEM, "no memory for %zu resumed parameters", n);
    free(*params);
    *params = p;
    ck->m = malloc(n * sizeof *ck->m), ck->v = malloc(n * sizeof *ck->v);
    VKG_CHECK(ck->m && ck->v, VKG_ERR_NOMEM, "no memory for %zu resumed moments", n);
    t->mcfg = ck->cfg = h.cfg;
    ck->num_params = n;
    ck->state = h.state;
    t->resumed = 1;
    return VKG_OK;
}

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
    "pipeline stages (--pp)",
    "pipeline schedule (--pp-schedule)",
    "ZeRO stage (--zero)",
    "ZeRO-1 shards (hash: the devices' partition of the gradient norm)",
    "gradient exchange dtype (--grad-dtype)",
    "consecutive skipped steps that stop the run (--max-skipped)",
    "--rank-batch auto (its --rebalance-every; 0: a fixed split)",
    "synchronisation (--sync) and --inner-steps",
    "--outer-lr and --outer-momentum (bits)",
    "pseudo-gradient dtype (--outer-dtype)",
    "streaming: --fragments and --outer-delay",
    "streaming: --outer-mix (bits)",
    "AdamW's --beta1 and --beta2 (bits)",
    "--eps and the first loss scale (--loss-scale; bits)",
    "--loss-scale-window and --precision",
    "checkpoints (--ckpt-dir given, --ckpt-every: saving is collective)",
    "evaluation (--eval-every, --eval-batches: evaluating is collective)",
    "the model's family (kv heads, head dim, MLP, norm, positions, rope, biases, tie; hash)",
};

static uint64_t fbits(float a, float b)
{
    uint32_t x, y;
    memcpy(&x, &a, 4), memcpy(&y, &b, 4);
    return (uint64_t)x << 32 | y;
}

vkg_status vkg__train_agree(vkg_trainer_t *t, const vkg_checkpoint *ck)
{
    if (vkg_strategy_world(t->par) == 1)
        return VKG_OK;
    const vkg_train_config *c = &t->cfg;
    uint64_t v[41];
    memset(v, 0, sizeof v);
    v[0] = (uint64_t)t->mcfg.max_seq_len, v[1] = (uint64_t)t->mcfg.vocab_size;
    v[2] = (uint64_t)t->mcfg.padded_vocab_size, v[3] = (uint64_t)t->mcfg.num_layers;
    v[4] = (uint64_t)t->mcfg.num_heads, v[5] = (uint64_t)t->mcfg.channels;
    v[6] = (uint64_t)t->T, v[7] = t->hp.total_batch;
    v[8] = (uint64_t)vkg_strategy_global_batch(t->par), v[9] = (uint64_t)vkg_strategy_world(t->par);
    v[10] = c->seed, v[11] = (uint64_t)c->shuffle, v[12] = (uint64_t)c->steps;
    v[13] = fbits(t->sched.lr, t->sched.lr_min_frac), v[14] = (uint64_t)t->sched.kind;
    v[15] = (uint64_t)t->sched.warmup, v[16] = fbits(c->grad_clip, c->weight_decay);
    v[17] = t->train ? vkg_data_num_batches(t->train) : 0;
    v[18] = t->train ? vkg_data_num_tokens(t->train) : 0;
    v[19] = t->resumed ? ck->state.step : 0;
    v[20] = t->train ? vkg_data_checksum(t->train) : 0;
    v[21] = vkg_strategy_batch_hash(t->par);
    v[22] = vkg_strategy_bucket_bytes(t->par);
    v[23] = (uint64_t)(c->par.pp > 1 ? c->par.pp : 1), v[24] = (uint64_t)c->par.pp_schedule;
    v[25] = (uint64_t)vkg_strategy_zero(t->par), v[26] = vkg_strategy_zero_hash(t->par);
    v[27] = (uint64_t)c->par.grad_dtype, v[28] = (uint64_t)c->max_skipped;
    v[29] = c->par.rank_batch_auto ? (uint64_t)c->rebalance_every : 0;
    int diloco = c->par.sync != 0; /* the outer flags matter only then */
    v[30] = (uint64_t)c->par.sync << 32 | (uint64_t)(diloco ? c->par.inner_steps : 0);
    v[31] = diloco ? fbits(c->par.outer_lr, c->par.outer_momentum) : 0;
    v[32] = diloco ? (uint64_t)c->par.outer_dtype : 0;
    v[33] = diloco ? (uint64_t)(uint32_t)c->par.fragments << 32 | (uint32_t)c->par.outer_delay : 0;
    v[34] = diloco ? fbits(c->par.outer_mix, 0.0f) : 0;
    v[35] = fbits(c->beta1, c->beta2), v[36] = fbits(c->eps, c->loss_scale);
    v[37] = (uint64_t)(uint32_t)c->loss_scale_window << 32 | (uint32_t)c->precision;
    int ckpt = t->ckpt_dir[0] != '\0'; /* the trainer's copy: cfg's is not kept */
    v[38] = (uint64_t)ckpt << 32 | (uint32_t)(ckpt ? c->ckpt_every : 0);
    v[39] = t->val ? (uint64_t)(uint32_t)c->eval_every << 32 | (uint32_t)c->eval_batches : 0;
    /* FNV-1a over the configuration past its GPT-2 fields (ints and floats: no padding) */
    const unsigned char *fam = (const unsigned char *)&t->mcfg.num_kv_heads;
    const unsigned char *end = (const unsigned char *)(&t->mcfg + 1);
    v[40] = 1469598103934665603ull;
    for (; fam < end; fam++)
        v[40] = (v[40] ^ *fam) * 1099511628211ull;
    return vkg_strategy_check_match(t->par, v, fp_names, 41);
}

vkg_status vkg__train_resume_data(vkg_trainer_t *t, const vkg_checkpoint_state *s)
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
