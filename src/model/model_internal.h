/* Internal to src/model: the vkg_model struct and the recorder. */
#ifndef VKG_MODEL_INTERNAL_H
#define VKG_MODEL_INTERNAL_H

#include <math.h>

#include "model/model.h"
#include "ops/ops.h"

#define VKG_MODEL_NUM_ACTS 21

/* The parameter tensors, in llm.c's table order (index into vkg_model's p, g, param_sizes). */
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
    LNFB
};
#define VKG_MODEL_NUM_GRAD_ACTS 13
#define VKG_MODEL_NUM_LAYER_GRADS 9 /* dln1 .. dfcproj: one layer's, zeroed before each layer */

/* Forward activations, llm.c's names; shapes in memory.c's act_sizes. Those of a layer (ln1 ..
 * residual3, VKG_MODEL_ACT_LAYERED) are one tensor per layer, in the slot's `layers`; the others
 * in its `acts`. */
#define VKG_MODEL_ACT_LAYERED(i) ((i) >= 1 && (i) <= 15)
typedef union vkg_model_acts {
    vkg_tensor t[VKG_MODEL_NUM_ACTS];
    struct {
        vkg_tensor encoded, ln1, ln1_mean, ln1_rstd, qkv, atty, lse, attproj, residual2, ln2,
            ln2_mean, ln2_rstd, fch, fch_gelu, fcproj, residual3, lnf, lnf_mean, lnf_rstd, logits,
            losses;
    } s;
} vkg_model_acts;

/* Gradients of the activations, as llm.c keeps them: one layer's (t[1 .. 9], reused by every
 * layer and zeroed before it), the gradient of the residual stream at layer l's output in
 * dstream[l % 2] (zeroed before the layer below adds into it), dencoded and dlnf. */
typedef union vkg_model_grad_acts {
    vkg_tensor t[VKG_MODEL_NUM_GRAD_ACTS];
    struct {
        vkg_tensor dencoded, dln1, dqkv, datty, dattproj, dresidual2, dln2, dfch, dfch_gelu,
            dfcproj, dstream0, dstream1, dlnf;
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
    vkg_param_table table; /* the whole model's */
    int nl;                /* layers in the part */
    int embed, head;       /* the part's flags */
    size_t nparams;        /* in the part */
    size_t slot_bytes;     /* device bytes of one activation slot */
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
    vkg_tensor gelu;       /* (B*T, 4C): one layer's GELU output (with VKG_MODEL_RECOMPUTE_GELU) */
    vkg_tensor dtop;       /* (B*T, C) gradient of the output (parts without the head) */
    vkg_tensor mm_scratch; /* (B*T, 4C): transposed matmul inputs */
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
/* The activation arena's tensors of the resolved options o, in the order vkg_model_create binds
 * them (each slot's activations, its layers' and its tokens; then the gradient activations and
 * the scratch tensors): their bytes, names and (types, may be NULL) element types. Returns how
 * many. */
int vkg__model_act_arena_tensors(const vkg_model_config *cfg, const vkg_model_opts *o,
                                 size_t *bytes, const char **names, vkg_dtype *types);
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
