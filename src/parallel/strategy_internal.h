/* Internal to src/parallel: the strategy object and the table of what differs between
 * strategies. strategy.c drives the step (micro-batches, reduction, norm, update); a strategy's
 * table says how the last micro-batch runs, what is reduced and how a mean is taken. */
#ifndef VKG_PARALLEL_STRATEGY_INTERNAL_H
#define VKG_PARALLEL_STRATEGY_INTERNAL_H

#include "parallel/buckets.h"
#include "parallel/job.h"
#include "parallel/strategy.h"

typedef struct vkg_strategy_vt {
    const char *name;
    /* After the model and optimizer exist (buckets, host buffers). */
    vkg_status (*setup)(vkg_strategy *s);
    /* Broadcast the starting point from rank 0 (nothing alone): vkg__strategy_share. */
    vkg_status (*share)(vkg_strategy *s, float *params, float *m, float *v);
    /* The last micro-batch of a step (s->inputs, s->targets): forward and backward, with the
     * communication that overlaps it. */
    vkg_status (*last_micro)(vkg_strategy *s, float *loss);
    /* After every micro-batch: reduce what the step needs (gradients, the mean loss, the stop
     * flag), and say how long gradient communication took. */
    vkg_status (*reduce)(vkg_strategy *s, double *loss, int *stop, vkg_strategy_step_out *out);
    /* A job-wide token-weighted mean of a per-rank mean. */
    vkg_status (*mean)(vkg_strategy *s, double *value);
    /* The global sum of squares of the reduced gradients (NULL: the optimizer's own), and what
     * follows the update (NULL: nothing); both add their communication to out. */
    vkg_status (*norm)(vkg_strategy *s, float *sumsq, vkg_strategy_step_out *out);
    vkg_status (*finish)(vkg_strategy *s, vkg_strategy_step_out *out);
    /* Strategies that split the model replace the whole-model calls (NULL: strategy.c's). */
    vkg_status (*build)(vkg_strategy *s);
    vkg_status (*step)(vkg_strategy *s, vkg_data_t *data, const vkg_strategy_step_in *in,
                       vkg_strategy_step_out *out);
    vkg_status (*eval)(vkg_strategy *s, vkg_data_t *data, int n, float *loss);
    vkg_status (*logits)(vkg_strategy *s, const int32_t *inputs, int b, int t, float *row);
    vkg_status (*gather)(vkg_strategy *s, float *params, float *m, float *v);
    int (*spans)(const vkg_strategy *s, const vkg_span **spans);
    void (*free_impl)(vkg_strategy *s);
} vkg_strategy_vt;

struct vkg_strategy {
    const vkg_strategy_vt *vt;
    vkg_job *job;          /* the job: layout, groups, batches (world 1 alone) */
    uint64_t bucket_bytes; /* 0: no overlap */
    vkg_strategy_model mc;
    vkg_gpt2 *model; /* this rank's part */
    vkg_adamw *opt;
    int32_t *inputs, *targets; /* (rank batch, T) */
    /* dp */
    float *grads;               /* (param count) the collectives' buffer (vkg_comm_buffer_alloc) */
    size_t grads_bytes;         /* its size: whole units of the device's import alignment */
    vkg_arena *grads_import;    /* grads as a device buffer: zero-copy buckets (NULL: copy path) */
    uint64_t zero_copy_buckets; /* buckets reduced with neither a pack nor an unpack on the host */
    char bucket_path[256];      /* how buckets reach grads, and why ("" without buckets) */
    uint16_t *grads16;          /* (param count) bf16 exchange buffer (vkg_comm_buffer_alloc;
                                   NULL unless grad_dtype is bf16) */
    size_t grads16_bytes;
    vkg_buckets *buckets;       /* NULL without overlap */
    double comm_ms, exposed_ms; /* gradient communication of the last step */
    vkg_strategy_config cfg;    /* as created (pointers not kept past create) */
    struct vkg_pp *pp;          /* pipeline state (pp_strategy.c) */
    struct vkg_zero *zero;      /* ZeRO-1 state (zero.c) */
};

/* The whole model's starting point (and moments, when m is not NULL) from rank 0 to every rank
 * of the job; each rank then loads its part of it (strategy.c). */
vkg_status vkg__strategy_share(vkg_strategy *s, float *params, float *m, float *v);
/* Create this rank's model part (part, with slots activation slots), its AdamW (over the part's
 * parameters [first, first + count) only when count > 0: a ZeRO-1 shard) and the token buffers
 * (strategy.c). */
vkg_status vkg__strategy_whole_build(vkg_strategy *s, vkg_gpt2_part part, int slots, size_t first,
                                     size_t count);

extern const vkg_strategy_vt vkg__strategy_single;
extern const vkg_strategy_vt vkg__strategy_dp;
extern const vkg_strategy_vt vkg__strategy_pp;
extern const vkg_strategy_vt vkg__strategy_zero;

/* The data-parallel table's entries, which ZeRO-1 shares (dp_strategy.c): they reduce gradients
 * with vkg__dp_reduce_grads. */
vkg_status vkg__dp_setup(vkg_strategy *s);
vkg_status vkg__dp_last_micro(vkg_strategy *s, float *loss);
vkg_status vkg__dp_reduce(vkg_strategy *s, double *loss, int *stop, vkg_strategy_step_out *out);
vkg_status vkg__dp_mean(vkg_strategy *s, double *value);
/* Sum gradients over the ranks: buf (n floats) is gradient bucket k packed (k < 0: the whole
 * gradient); an allreduce, or under ZeRO-1 a reduce-scatter that leaves only this rank's shard
 * summed (zero.c), in fp32 or, with bf16 exchange, in bf16 (rounded through s->grads16 at the
 * same offset and widened back: the whole of buf for the allreduce, the shard for ZeRO-1). */
vkg_status vkg__dp_reduce_grads(vkg_strategy *s, int k, float *buf, size_t n);
vkg_status vkg__zero_reduce_grads(vkg_strategy *s, int k, float *buf, size_t n);
/* Pipeline setup at create: stage layout and checks (pp_strategy.c). */
vkg_status vkg__pp_create(vkg_strategy *s, const vkg_strategy_config *c);
/* Whether grad_dtype is fp32, or bf16 with 2 or more data-parallel ranks (dp_strategy.c). */
vkg_status vkg__grad_dtype_check(const vkg_strategy_config *c, const vkg_job_layout *lay);
/* ZeRO-1: whether the job can run it (one stage, 2 or more ranks), before joining (zero.c). */
vkg_status vkg__zero_check(const vkg_strategy_config *c, const vkg_job_layout *lay);

#endif
