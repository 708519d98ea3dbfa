/* Internal to src/model: the vkg_model struct and the recorder. */
#ifndef VKG_MODEL_INTERNAL_H
#define VKG_MODEL_INTERNAL_H

#include <math.h>

#include "model/model.h"
#include "ops/ops.h"

#define VKG_MODEL_NUM_ACTS 23

/* The parameter tensors' roles in the recording. m->ix[role] is the role's index in the model's
 * table (and in p, g, w, the layout's arrays), -1 where the family has no such tensor; GPT-2's
 * 16, in llm.c's order, come first and are its table's indices. */
enum {
    WTE,
    WPE,
    LN1W,
    LN1B,
    QKVW,
    QKVB,
    ATTPROJW,
    ATTPROJB,
    LN2W,
    LN2B,
    FCW,
    FCB,
    FCPROJW,
    FCPROJB,
    LNFW,
    LNFB,
    QNORMW, /* QK-norm's weights (Qwen 3) */
    KNORMW,
    LMHEAD, /* the untied classifier */
    VKG_MODEL_NUM_ROLES
};
#define VKG_MODEL_NUM_GRAD_ACTS 14
#define VKG_MODEL_NUM_LAYER_GRADS 9 /* dln1 .. dfcproj: one layer's, zeroed before each layer */

/* Forward activations, llm.c's names; shapes in memory.c's act_sizes. Those of a layer (ln1 ..
 * residual3, qkvr, qk_rstd: VKG_MODEL_ACT_LAYERED) are one tensor per layer, in the slot's
 * `layers`; the others in its `acts`. By family: ln*_mean hold nothing with RMSNorm; fch is the
 * MLP's first product (with SwiGLU its gate and up halves, 2F wide) and fch_gelu its activation
 * (GELU, SwiGLU or ReLU^2, F wide); with QK-norm qkvr is the q/k/v product's output and qkv the
 * normed heads (qk_rstd their statistics); with rotary embeddings qkv holds q and k rotated. */
#define VKG_MODEL_ACT_LAYERED(i) (((i) >= 1 && (i) <= 15) || (i) >= 21)
typedef union vkg_model_acts {
    vkg_tensor t[VKG_MODEL_NUM_ACTS];
    struct {
        vkg_tensor encoded, ln1, ln1_mean, ln1_rstd, qkv, atty, lse, attproj, residual2, ln2,
            ln2_mean, ln2_rstd, fch, fch_gelu, fcproj, residual3, lnf, lnf_mean, lnf_rstd, logits,
            losses, qkvr, qk_rstd;
    } s;
} vkg_model_acts;

/* Gradients of the activations, as llm.c keeps them: one layer's (t[1 .. 9], and dqkvr with
 * QK-norm: the gradient of the q/k/v product's output; reused by every layer and zeroed before
 * it), the gradient of the residual stream at layer l's output in dstream[l % 2] (zeroed before
 * the layer below adds into it), dencoded and dlnf. */
typedef union vkg_model_grad_acts {
    vkg_tensor t[VKG_MODEL_NUM_GRAD_ACTS];
    struct {
        vkg_tensor dencoded, dln1, dqkv, datty, dattproj, dresidual2, dln2, dfch, dfch_gelu,
            dfcproj, dstream0, dstream1, dlnf, dqkvr;
    } s;
} vkg_model_grad_acts;

/* Command lists of each activation slot. */
enum {
    VKG_MODEL_LIST_FWD,    /* forward (to the logits, or to the output boundary) */
    VKG_MODEL_LIST_EVAL,   /* forward and losses (last part; others: as FWD) */
    VKG_MODEL_LIST_FWDT,   /* training forward: forward, loss and dlogits (last part) */
    VKG_MODEL_LIST_BWD,    /* backward (accumulating) */
    VKG_MODEL_LIST_FWDBWD, /* FWDT then BWD in one list */
    VKG_MODEL_LIST_BWD_IN, /* BWD's input pass (opts.split_w; NULL otherwise) */
    VKG_MODEL_LIST_BWD_W,  /* BWD's weight pass (opts.split_w; NULL otherwise) */
    VKG_MODEL_NUM_LISTS
};

#define VKG_MODEL_NUM_KEPT 4

/* One activation slot: the forward activations of one micro-batch in flight and its tokens. */
typedef struct vkg_model_slot {
    vkg_model_acts acts;        /* encoded, lnf .. losses */
    vkg_model_acts *layers;     /* (nl) layer l's ln1 .. residual3 */
    vkg_tensor inputs, targets; /* (B, T) int32 */
    /* (nl x VKG_MODEL_NUM_KEPT, opts.split_w; NULL otherwise) layer l's product output gradients,
     * from the input pass to the weight pass: dfcproj, dfch, dattproj, dqkv */
    vkg_tensor *kept;
    vkg_cmd *lists[VKG_MODEL_NUM_LISTS];
    int logits_valid;
} vkg_model_slot;

struct vkg_model {
    vkg_device_t *dev;
    vkg_model_config cfg;
    vkg_model_opts opts;
    vkg_model_layout layout;
    vkg_param_table table;       /* the whole model's */
    int ix[VKG_MODEL_NUM_ROLES]; /* each role's tensor in the table, -1: none */
    int nl;                      /* layers in the part */
    int embed, head;             /* the part's flags */
    size_t nparams;              /* in the part */
    size_t slot_bytes;           /* device bytes of one activation slot */
    vkg_arena *arena_params, *arena_grads, *arena_acts;
    vkg_tensor params, grads; /* whole tensors */
    vkg_tensor p[VKG_MAX_PARAM_TENSORS], g[VKG_MAX_PARAM_TENSORS];
    /* The weights the matrix products read: with bf16 precision the tensors of params16, the bf16
     * copy of params (cast at the start of every forward list, so it is always that of the
     * current master weights); with fp32, p. */
    vkg_tensor params16;
    vkg_tensor w[VKG_MAX_PARAM_TENSORS];
    vkg_model_slot *slots; /* (opts.slots) */
    vkg_model_grad_acts gacts;
    vkg_tensor gelu; /* (B*T, F): one layer's MLP activation (with VKG_MODEL_RECOMPUTE_GELU) */
    vkg_tensor dtop; /* (B*T, C) gradient of the output (parts without the head) */
    vkg_tensor mm_scratch; /* (B*T, the widest product input or output): transposed inputs */
    vkg_tensor inv_freq;   /* (D/2) rotary embeddings' frequencies (rotary models; else empty) */
    vkg_tensor delta;      /* (B, NH, T): attention's row sums of dout * out */
    vkg_tensor dscale;     /* (1) the loss scale d(loss) is multiplied by (1 unless set) */
    float grad_scale;      /* dscale's value */
    vkg_cmd *zero;         /* grads = 0 */
    /* The boundaries' host side, indexed IN s, OUT K + s, DOUT 2K, DIN 2K + 1 (K slots): where
     * the host reads and writes them. On unified memory the activation arena's mapping; elsewhere
     * a host-visible copy that the slot's lists fill or read with copies recorded in them. */
    void **bnd_host;      /* (2K + 2) NULL where the part has no such boundary */
    vkg_tensor *bnd_copy; /* (2K + 2) the host-visible copies (devices without unified memory) */
    vkg_arena *arena_bnd; /* their arena, or NULL */
    struct vkg_model_split *split; /* NULL until vkg_model_split */
};

/* The options with the whole model for an unset part (opts NULL: the defaults) into *o, checked
 * against cfg (memory.c): VKG_ERR_INVALID_ARG names the option that is out of range. */
vkg_status vkg__model_resolve_opts(const vkg_model_config *cfg, const vkg_model_opts *opts,
                                   vkg_model_opts *o);
/* The most tensors the activation arena of nl layers and `slots` slots holds: the capacity of
 * the arrays vkg__model_act_arena_tensors fills. */
int vkg__model_max_act_tensors(int nl, int slots, int split_w);
/* Where a tensor of the activation arena belongs: a slot's activation (t[index] of its acts) or
 * layer activation (of layers[layer]), its tokens (index 0 inputs, 1 targets) or kept gradients
 * (kept[layer * VKG_MODEL_NUM_KEPT + index]); or (slot -1) the gradient activations' t[index] or
 * scratch tensor `index` (mm_scratch, delta, dtop, gelu, dscale, inv_freq). */
enum {
    VKG__ACT_SLOT,
    VKG__ACT_LAYER,
    VKG__ACT_TOKENS,
    VKG__ACT_KEPT,
    VKG__ACT_GRAD,
    VKG__ACT_SCRATCH
};
typedef struct vkg__model_act_place {
    short kind, slot, layer, index;
} vkg__model_act_place;
/* The activation arena's tensors of the resolved options o, in the order vkg_model_create binds
 * them (each slot's activations, its layers' and its tokens; then the gradient activations and
 * the scratch tensors; a family's tensors that the configuration lacks left out): their bytes,
 * names, (types, may be NULL) element types and (places, may be NULL) places. Returns how many. */
int vkg__model_act_arena_tensors(const vkg_model_config *cfg, const vkg_model_opts *o,
                                 size_t *bytes, const char **names, vkg_dtype *types,
                                 vkg__model_act_place *places);
/* The table index of each role of cfg's table into ix (-1 where the family has none). */
void vkg__model_roles(const vkg_param_table *t, int ix[VKG_MODEL_NUM_ROLES]);
/* The classifier's role: WTE (tied) or LMHEAD. */
int vkg__model_classifier(const vkg_model *m);
/* 1 when the part's gradients end with a unit of embeddings the head does not read (wpe, or wte
 * untied or without the head); 0 otherwise (a rotary model's whole part with a tied embedding
 * finishes it in the classifier's unit and in the rows its caller adds). */
int vkg__model_embed_unit(const vkg_model *m);
/* Record every command list of m (record.c). */
vkg_status vkg__model_record(vkg_model *m);

/* Called by the recorder after gradient unit `unit` is complete (the last unit is not
 * announced); may end *pc and begin another list in its place. */
typedef vkg_status (*vkg__model_cut_fn)(void *ctx, vkg_cmd **pc, int unit);
/* Record the training forward-backward of slot s into *pc (begun by the caller), calling cut at
 * unit ends (cut NULL: one list, the encoder's wte rows included); the caller ends the last list.
 */
vkg_status vkg__model_record_fwdbwd_cut(vkg_model *m, int s, vkg_cmd **pc, vkg__model_cut_fn cut,
                                        void *ctx);
/* Record the backward of slot s alone into *pc, cut as above (a part's split backward: the
 * encoder's wte rows are recorded where the part has no head). */
vkg_status vkg__model_record_backward_cut(vkg_model *m, int s, vkg_cmd **pc, vkg__model_cut_fn cut,
                                          void *ctx);
/* Boundary `which` of slot s as a device tensor (VKG_ERR_INVALID_ARG when the part has none),
 * and the copy between it and its host-visible copy recorded into c (nothing on unified
 * memory or for a boundary the part lacks): to the host for OUT and DIN, from it for IN and
 * DOUT. */
vkg_status vkg__model_boundary_tensor(const vkg_model *m, vkg_model_boundary which, int s,
                                      vkg_tensor *out);
vkg_status vkg__model_record_boundary(vkg_model *m, vkg_cmd *c, vkg_model_boundary which, int s);
/* Split recording (split.c): freed by vkg_model_destroy. */
void vkg__model_split_free(vkg_model *m);
/* Bytes of the split recording's host copy of the gradients (0 without one). */
size_t vkg__model_split_host_bytes(const vkg_model *m);
/* Check and upload one micro-batch into slot s (model.c); the mean of slot s's losses. */
vkg_status vkg__model_upload(vkg_model *m, int s, const int32_t *inputs, const int32_t *targets);
vkg_status vkg__model_mean_loss(vkg_model *m, int s, float *out);

#endif
