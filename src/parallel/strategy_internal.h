/* Internal to src/parallel: the strategy object and the table of what differs between
 * strategies. A strategy is the job, this rank's model part, its optimizer and, where a
 * data-parallel group sums whole-model gradients or a pipeline stage's, a gradient reducer; with
 * ZeRO-1 its shards, with DiLoCo its outer rounds. The step is one (step.c): the layout's passes,
 * then one tail (the norm by the sharding, the loss/stop exchange, the update, the share by the
 * sharding, the end-of-step sync). A table may replace the calls build, passes, eval, logits and
 * gather with its own and free what it added: a NULL entry is the whole-model default (whole.c),
 * which serves one device, plain data parallelism, ZeRO-1 and DiLoCo alike. */
#ifndef VKG_PARALLEL_STRATEGY_INTERNAL_H
#define VKG_PARALLEL_STRATEGY_INTERNAL_H

#include "parallel/job.h"
#include "parallel/reducer.h"
#include "parallel/strategy.h"

typedef struct vkg_strategy_vt {
    const char *name;
    /* Optional: each replaces the strategy.h call of its name (NULL: whole.c's). */
    vkg_status (*build)(vkg_strategy *s);
    /* The step's passes: gradients accumulated over its micro-batches and summed over the
     * data-parallel group by the reducer (if any); *part: this rank's term of the job's
     * token-weighted loss (the sum over the job is the step's loss). out is zeroed on entry. */
    vkg_status (*passes)(vkg_strategy *s, vkg_data_t *data, const vkg_strategy_step_in *in,
                         double *part, vkg_strategy_step_out *out);
    vkg_status (*eval)(vkg_strategy *s, vkg_data_t *data, int n, float *loss);
    vkg_status (*logits)(vkg_strategy *s, const int32_t *inputs, int b, int t, float *row);
    vkg_status (*gather)(vkg_strategy *s, float *params, float *m, float *v);
    /* Optional: release s->impl (before the model and the optimizer). */
    void (*free_impl)(vkg_strategy *s);
} vkg_strategy_vt;

struct vkg_strategy {
    const vkg_strategy_vt *vt;
    vkg_job *job; /* the job: layout, groups, batches (world 1 alone) */
    vkg_strategy_model mc;
    vkg_model *model; /* this rank's part */
    vkg_adamw *opt;
    int32_t *inputs, *targets; /* (rank batch, T) */
    /* The reducer of a data-parallel group of whole models: wanted (reduces) with rc, created by
     * vkg_strategy_load over the built model (NULL before, and without a group); a pipeline
     * stage's (rc.pipeline) is created by the pipeline's build. */
    int reduces;
    vkg_grad_reducer_config rc;
    vkg_grad_reducer *reducer;
    vkg_strategy_config cfg; /* as created (pointers not kept past create) */
    void *impl;              /* the strategy's own state (pp_strategy.c, zero.c) */
    /* ZeRO-1: this rank's part cut into shards over its data-parallel group (NULL otherwise):
     * the reducer reduce-scatters over them, the step's tail takes the norm from their partial
     * sums and shares the updated parameters (shards.h) */
    struct vkg_shards *shards;
    /* The last step's timeline (pipelines: span_cap > 0), recorded by vkg__span. */
    vkg_span *spans;
    int nspans, span_cap;
    /* --sync diloco: the outer rounds (diloco.c) of whole-model replicas or of pipeline stages
     * (NULL otherwise) */
    struct vkg_diloco *diloco;
    /* 1: each rank's gradient is the mean over its own tokens (DiLoCo's replicas, which never sum
     * them), not its token-weighted share of the group's. */
    int own_grads;
    char describe[320]; /* vkg_strategy_outer_describe */
    int pp_layers[64];  /* --pp-layers: layers per stage (the pipeline's split), when given */
};

/* The loss scale of step in: 1 when it has none. */
static inline float vkg__step_scale(const vkg_strategy_step_in *in)
{
    return in->loss_scale > 0.0f ? in->loss_scale : 1.0f;
}

extern const vkg_strategy_vt vkg__strategy_single;
extern const vkg_strategy_vt vkg__strategy_dp;
extern const vkg_strategy_vt vkg__strategy_pp;
extern const vkg_strategy_vt vkg__strategy_zero;
extern const vkg_strategy_vt vkg__strategy_diloco;

/* Record a span of the step's timeline that started at t0 and ends now (step.c; nothing when the
 * strategy keeps none). */
void vkg__span(vkg_strategy *s, vkg_span_kind kind, int micro, double t0);

/* Pipeline setup at create: stage layout and checks (pp_strategy.c). */
vkg_status vkg__pp_create(vkg_strategy *s, const vkg_strategy_config *c);
/* The parameter layout of stage `stage` of this job's split (the whole model without a
 * pipeline), after build (whole.c). */
vkg_status vkg__stage_layout(const vkg_strategy *s, int stage, vkg_model_layout *lo);
/* A pipeline whose stages shard AdamW's moments over their data-parallel groups (--zero 1): the
 * shards' hash (0 for any other strategy). */
uint64_t vkg__pp_zero_hash(const vkg_strategy *s);
/* ZeRO-1 over whole-model ranks: the shards' hash (zero.c). */
uint64_t vkg__zero_hash(const vkg_strategy *s);
/* ZeRO-1: whether the job can run it (2 or more data-parallel ranks), before joining (zero.c). */
vkg_status vkg__zero_check(const vkg_strategy_config *c, const vkg_job_layout *lay);
/* DiLoCo (diloco.c): whether the job can run it, before joining (also checks that --sync is
 * valid); its start from the loaded parameters (the global parameters, zero momentum); the
 * checkpoint state of strategy.h (count 0 for other strategies). */
vkg_status vkg__diloco_check(const vkg_strategy_config *c, const vkg_job_layout *lay);
/* Its state over the built model (s->diloco): whole models, or this rank's pipeline stage, whose
 * exchanges run over the stage's data-parallel group; freed by vkg__diloco_free (NULL-safe). */
vkg_status vkg__diloco_build(vkg_strategy *s);
void vkg__diloco_free(vkg_strategy *s);
/* The start from the loaded parameters (this rank's part): the global parameters, zero
 * momentum. */
vkg_status vkg__diloco_start(vkg_strategy *s, const float *params);
/* After the update of optimizer step t: the outer steps that land or run now (out->outer,
 * outer_bytes, comm figures). Every rank of the job calls it after every step. */
vkg_status vkg__diloco_end_step(vkg_strategy *s, uint32_t t, vkg_strategy_step_out *out);
/* Before the step's own exchange: wait for the pieces that ran beside the passes, their time and
 * bytes into out (the wait as exposed communication); their failure is this call's. */
vkg_status vkg__diloco_join(vkg_strategy *s, vkg_strategy_step_out *out);
/* DiLoCo's settings for start-up lines (vkg_strategy_outer_describe), defaults resolved. */
void vkg__diloco_describe(const vkg_strategy_config *c, char *buf, size_t cap);
/* Host bytes of DiLoCo's outer step (0 for other strategies): the global parameters, the
 * momentum, the replica's parameters and, for bf16 and int8, every rank's payload. */
size_t vkg__diloco_host_bytes(const vkg_strategy *s);
size_t vkg__diloco_state_count(const vkg_strategy *s);
vkg_status vkg__diloco_state_gather(vkg_strategy *s, float *buf, uint32_t t);
vkg_status vkg__diloco_state_load(vkg_strategy *s, const float *buf, uint32_t t);
#endif
