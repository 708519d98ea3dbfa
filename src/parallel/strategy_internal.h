/* Internal to src/parallel: the strategy object and the table of what differs between
 * strategies. strategy.c drives the step (micro-batches, reduction, norm, update); a strategy's
 * table says how the last micro-batch runs, what is reduced and how a mean is taken. */
#ifndef VKG_PARALLEL_STRATEGY_INTERNAL_H
#define VKG_PARALLEL_STRATEGY_INTERNAL_H

#include "parallel/buckets.h"
#include "parallel/dp.h"
#include "parallel/strategy.h"

typedef struct vkg_strategy_vt {
    const char *name;
    /* After the model and optimizer exist (buckets, host buffers). */
    vkg_status (*setup)(vkg_strategy *s);
    /* Broadcast the starting point from rank 0 (nothing alone). */
    vkg_status (*share)(vkg_strategy *s, float *params, float *m, float *v);
    /* The last micro-batch of a step (s->inputs, s->targets): forward and backward, with the
     * communication that overlaps it. */
    vkg_status (*last_micro)(vkg_strategy *s, float *loss);
    /* After every micro-batch: reduce what the step needs (gradients, the mean loss, the stop
     * flag), and say how long gradient communication took. */
    vkg_status (*reduce)(vkg_strategy *s, double *loss, int *stop, vkg_strategy_step_out *out);
    /* A job-wide token-weighted mean of a per-rank mean. */
    vkg_status (*mean)(vkg_strategy *s, double *value);
} vkg_strategy_vt;

struct vkg_strategy {
    const vkg_strategy_vt *vt;
    vkg_dp *dp;            /* the job's data-parallel group (world 1 alone) */
    uint64_t bucket_bytes; /* 0: no overlap */
    vkg_strategy_model mc;
    vkg_gpt2 *model; /* this rank's part */
    vkg_adamw *opt;
    int32_t *inputs, *targets; /* (rank batch, T) */
    /* dp */
    float *grads;               /* (param count) host buffer for the allreduce */
    vkg_buckets *buckets;       /* NULL without overlap */
    double comm_ms, exposed_ms; /* gradient communication of the last step */
};

extern const vkg_strategy_vt vkg__strategy_single;
extern const vkg_strategy_vt vkg__strategy_dp;

#endif
