/* Pipeline schedules: the order in which one stage runs the forward (F) and backward (B, W) passes
 * of a step's M micro-batches, and the activation slot each one uses. Pure functions; no
 * communication (the strategy sends and receives around each action).
 *   GPipe  F0 .. F(M-1), then B0 .. B(M-1): every micro-batch's activations alive at once (M
 *          slots). Backwards run in ascending order so that the gradients accumulate in the
 *          order one device accumulates them.
 *   1F1B   w = min(S - 1 - stage, M) warm-up forwards, then F(w+i), B(i) alternating, then the
 *          remaining backwards: at most min(S - stage, M) micro-batches alive.
 * Both have the bubble (S - 1) / (M + S - 1) of the step.
 *   ZB-H1  (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024) the backward split into its
 *          input pass B (what the previous stage waits for) and weight pass W: 1F1B's order of F
 *          and B, each W `stage` B's after its own B, the deferred W's at the end, where 1F1B's
 *          later stages sit idle. W's run in ascending order, so that each weight gradient is
 *          summed in 1F1B's order: the same bits. Up to min(S, M) micro-batches alive on every
 *          stage (1F1B's first stage's peak). With F, B and W of equal time the bubble is
 *          (S - 1)(F + B - W) against 1F1B's (S - 1)(F + B + W): a third.
 */
#ifndef VKG_PARALLEL_PP_SCHEDULE_H
#define VKG_PARALLEL_PP_SCHEDULE_H

#include "model/model.h"
#include "vkgpt/model.h"

enum {
    VKG_PP_OP_F, /* forward */
    VKG_PP_OP_B, /* backward: the whole one (GPipe, 1F1B) or its input pass (ZB-H1) */
    VKG_PP_OP_W  /* the backward's weight pass (ZB-H1) */
};
typedef struct vkg_pp_action {
    int op;    /* VKG_PP_OP_* */
    int micro; /* micro-batch index in [0, M) */
    int slot;  /* activation slot */
} vkg_pp_action;

/* The actions of stage `stage` of S under kind (VKG_PP_1F1B, VKG_PP_GPIPE or VKG_PP_ZBH1) into
 * out (vkg_pp_actions entries); returns the number of activation slots the stage needs. */
int vkg_pp_schedule(int kind, int S, int stage, int M, vkg_pp_action *out);
/* How many actions a step of M micro-batches has under kind: 2M, 3M for ZB-H1. */
int vkg_pp_actions(int kind, int M);

/* The stage's slot count alone. */
int vkg_pp_slots(int kind, int S, int stage, int M);

/* (plan.c) Layers per stage (layers[S]) for a model of cfg at sequence length T: req (S counts,
 * checked to be >= 1 each and to sum to L) when given, else the split of the L layers into S runs
 * that minimises the costliest stage, the last stage also paying for the classifier (about 2 C Vp
 * FLOPs per token against 24 C^2 + 4 T C for a block). Errors: VKG_ERR_INVALID_ARG naming the
 * fix (more stages than layers, a bad --pp-layers list). */
vkg_status vkg_pp_split(const vkg_model_config *cfg, int T, int S, const int *req, int *layers);
/* Stage `stage`'s model part under a split of S stages (layers[S], vkg_pp_split's): its layers
 * [first, last), the embeddings on stage 0, the head on the last. */
vkg_model_part vkg_pp_part(const int *layers, int S, int stage);

#endif
