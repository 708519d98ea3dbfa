/* Internal to src/model: the vkg_gpt2 struct and the recorder. */
#ifndef VKG_MODEL_GPT2_INTERNAL_H
#define VKG_MODEL_GPT2_INTERNAL_H

#include <math.h>

#include "model/gpt2.h"
#include "ops/ops.h"

#define VKG_GPT2_NUM_ACTS 21

/* The parameter tensors, in llm.c's table order (index into vkg_gpt2's p, g, param_sizes). */
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
#define VKG_GPT2_NUM_GRAD_ACTS 13
#define VKG_GPT2_NUM_LAYER_GRADS 9 /* dln1 .. dfcproj: one layer's, zeroed before each layer */

/* Forward activations, llm.c's names; shapes in gpt2_memory.c's act_sizes. Those of a layer (ln1 ..
 * residual3, VKG_GPT2_ACT_LAYERED) are one tensor per layer, in the slot's `layers`; the others
 * in its `acts`. */
#define VKG_GPT2_ACT_LAYERED(i) ((i) >= 1 && (i) <= 15)
typedef union vkg_gpt2_acts {
    vkg_tensor t[VKG_GPT2_NUM_ACTS];
    struct {
        vkg_tensor encoded, ln1, ln1_mean, ln1_rstd, qkv, atty, lse, attproj, residual2, ln2,
            ln2_mean, ln2_rstd, fch, fch_gelu, fcproj, residual3, lnf, lnf_mean, lnf_rstd, logits,
            losses;
    } s;
} vkg_gpt2_acts;

/* Gradients of the activations, as llm.c keeps them: one layer's (t[1 .. 9], reused by every
 * layer and zeroed before it), the gradient of the residual stream at layer l's output in
 * dstream[l % 2] (zeroed before the layer below adds into it), dencoded and dlnf. */
typedef union vkg_gpt2_grad_acts {
    vkg_tensor t[VKG_GPT2_NUM_GRAD_ACTS];
    struct {
        vkg_tensor dencoded, dln1, dqkv, datty, dattproj, dresidual2, dln2, dfch, dfch_gelu,
            dfcproj, dstream0, dstream1, dlnf;
    } s;
} vkg_gpt2_grad_acts;

/* Command lists of each activation slot. */
enum {
    VKG_GPT2_LIST_FWD,    /* forward (to the logits, or to the output boundary) */
    VKG_GPT2_LIST_EVAL,   /* forward and losses (last part; others: as FWD) */
    VKG_GPT2_LIST_FWDT,   /* training forward: forward, loss and dlogits (last part) */
    VKG_GPT2_LIST_BWD,    /* backward (accumulating) */
    VKG_GPT2_LIST_FWDBWD, /* FWDT then BWD in one list */
    VKG_GPT2_LIST_BWD_IN, /* BWD's input pass (opts.split_w; NULL otherwise) */
    VKG_GPT2_LIST_BWD_W,  /* BWD's weight pass (opts.split_w; NULL otherwise) */
    VKG_GPT2_NUM_LISTS
};

#define VKG_GPT2_NUM_KEPT 4

/* One activation slot: the forward activations of one micro-batch in flight and its tokens. */
typedef struct vkg_gpt2_slot {
    vkg_gpt2_acts acts;         /* encoded, lnf .. losses */
    vkg_gpt2_acts *layers;      /* (nl) layer l's ln1 .. residual3 */
    vkg_tensor inputs, targets; /* (B, T) int32 */
    /* (nl x VKG_GPT2_NUM_KEPT, opts.split_w; NULL otherwise) layer l's product output gradients,
     * from the input pass to the weight pass: dfcproj, dfch, dattproj, dqkv */
    vkg_tensor *kept;
    vkg_cmd *lists[VKG_GPT2_NUM_LISTS];
    int logits_valid;
} vkg_gpt2_slot;

struct vkg_gpt2 {
    vkg_device_t *dev;
    vkg_gpt2_config cfg;
    vkg_gpt2_opts opts;
    vkg_gpt2_layout layout;
    int nl;            /* layers in the part */
    int embed, head;   /* the part's flags */
    size_t nparams;    /* in the part */
    size_t slot_bytes; /* device bytes of one activation slot */
    vkg_arena *arena_params, *arena_grads, *arena_acts;
    vkg_tensor params, grads; /* whole tensors */
    vkg_tensor p[VKG_GPT2_NUM_PARAM_TENSORS], g[VKG_GPT2_NUM_PARAM_TENSORS];
    /* The weights the matrix products read: with bf16 precision the tensors of params16, the bf16
     * copy of params (cast at the start of every forward list, so it is always that of the
     * current master weights); with fp32, p. */
    vkg_tensor params16;
    vkg_tensor w[VKG_GPT2_NUM_PARAM_TENSORS];
    vkg_gpt2_slot *slots; /* (opts.slots) */
    vkg_gpt2_grad_acts gacts;
    vkg_tensor gelu;       /* (B*T, 4C): one layer's GELU output (with VKG_GPT2_RECOMPUTE_GELU) */
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
    struct vkg_gpt2_split *split; /* NULL until vkg_gpt2_split */
};

/* The options with the whole model for an unset part (opts NULL: the defaults) into *o, checked
 * against cfg (gpt2_memory.c): VKG_ERR_INVALID_ARG names the option that is out of range. */
vkg_status vkg__gpt2_resolve_opts(const vkg_gpt2_config *cfg, const vkg_gpt2_opts *opts,
                                  vkg_gpt2_opts *o);
/* The most tensors the activation arena of nl layers and `slots` slots holds: the capacity of
 * the arrays vkg__gpt2_act_arena_tensors fills. */
int vkg__gpt2_max_act_tensors(int nl, int slots, int split_w);
/* The activation arena's tensors of the resolved options o, in the order vkg_gpt2_create binds
 * them (each slot's activations, its layers' and its tokens; then the gradient activations and
 * the scratch tensors): their bytes, names and (types, may be NULL) element types. Returns how
 * many. */
int vkg__gpt2_act_arena_tensors(const vkg_gpt2_config *cfg, const vkg_gpt2_opts *o, size_t *bytes,
                                const char **names, vkg_dtype *types);
/* Record every command list of m (gpt2_record.c). */
vkg_status vkg__gpt2_record(vkg_gpt2 *m);

/* Called by the recorder after gradient unit `unit` is complete (the last unit is not
 * announced); may end *pc and begin another list in its place. */
typedef vkg_status (*vkg__gpt2_cut_fn)(void *ctx, vkg_cmd **pc, int unit);
/* Record the training forward-backward of slot s into *pc (begun by the caller), calling cut at
 * unit ends (cut NULL: one list, the encoder's wte rows included); the caller ends the last list.
 */
vkg_status vkg__gpt2_record_fwdbwd_cut(vkg_gpt2 *m, int s, vkg_cmd **pc, vkg__gpt2_cut_fn cut,
                                       void *ctx);
/* Record the backward of slot s alone into *pc, cut as above (a part's split backward: the
 * encoder's wte rows are recorded where the part has no head). */
vkg_status vkg__gpt2_record_backward_cut(vkg_gpt2 *m, int s, vkg_cmd **pc, vkg__gpt2_cut_fn cut,
                                         void *ctx);
/* Boundary `which` of slot s as a device tensor (VKG_ERR_INVALID_ARG when the part has none),
 * and the copy between it and its host-visible copy recorded into c (nothing on unified
 * memory or for a boundary the part lacks): to the host for OUT and DIN, from it for IN and
 * DOUT. */
vkg_status vkg__gpt2_boundary_tensor(const vkg_gpt2 *m, vkg_gpt2_boundary which, int s,
                                     vkg_tensor *out);
vkg_status vkg__gpt2_record_boundary(vkg_gpt2 *m, vkg_cmd *c, vkg_gpt2_boundary which, int s);
/* Split recording (gpt2_split.c): freed by vkg_gpt2_destroy. */
void vkg__gpt2_split_free(vkg_gpt2 *m);
/* Bytes of the split recording's host copy of the gradients (0 without one). */
size_t vkg__gpt2_split_host_bytes(const vkg_gpt2 *m);
/* Check and upload one micro-batch into slot s (gpt2.c); the mean of slot s's losses. */
vkg_status vkg__gpt2_upload(vkg_gpt2 *m, int s, const int32_t *inputs, const int32_t *targets);
vkg_status vkg__gpt2_mean_loss(vkg_gpt2 *m, int s, float *out);

#endif
