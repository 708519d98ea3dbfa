/* CPU reference GPT-2: forward, backward, gradient norm and AdamW over llm.c's parameter layout,
 * built from the ops in ref.h. The tests use the double version for finite differences and the
 * float version to check the GPU trainer.
 *
 * Parameters live in ONE contiguous caller-owned array, the 16 tensors of llm.c in this order
 * (weights stored (out, in), row-major):
 *   0 wte (Vp,C)  1 wpe (maxT,C)  2 ln1w (L,C)  3 ln1b (L,C)  4 qkvw (L,3C,C)  5 qkvb (L,3C)
 *   6 attprojw (L,C,C)  7 attprojb (L,C)  8 ln2w (L,C)  9 ln2b (L,C)  10 fcw (L,4C,C)
 *   11 fcb (L,4C)  12 fcprojw (L,C,4C)  13 fcprojb (L,C)  14 lnfw (C)  15 lnfb (C)
 * Gradients and AdamW moments use the same layout. The classifier is tied to wte: logits
 * (B,T,Vp) = lnf x wte^T with no bias; vocabulary columns V..Vp-1 are masked out of the softmax
 * (their logits are computed from whatever wte's padding rows hold, zero in real models).
 *
 * A model object owns only the activations of one (B, T) shape and copies of the last inputs
 * and targets. Like ref.h, everything exists in two precisions: vkg_ref_gpt2_* on float (double
 * accumulation in reductions) and vkg_ref_gpt2_*_f64 on double. Libc only; never prints, never
 * exits; the only failures (bad config, out of memory) are reported by create as -1.
 */
#ifndef VKG_REF_GPT2_REF_H
#define VKG_REF_GPT2_REF_H

#include <stddef.h>
#include <stdint.h>

#define VKG_REF_GPT2_NUM_TENSORS 16

typedef struct vkg_ref_gpt2_config_t {
    int maxT; /* maximum sequence length (rows of wpe) */
    int V;    /* vocabulary size */
    int Vp;   /* padded vocabulary size (rows of wte), >= V */
    int L;    /* layers */
    int NH;   /* heads, divides C */
    int C;    /* channels */
} vkg_ref_gpt2_config_t;

/* AdamW hyperparameters for vkg_ref_gpt2_adamw. grad_clip <= 0 disables clipping. */
typedef struct vkg_ref_gpt2_adamw_t {
    double lr, beta1, beta2, eps, weight_decay, grad_clip;
} vkg_ref_gpt2_adamw_t;

/* 1 when every field is positive, Vp >= V and C % NH == 0; else 0. */
int vkg_ref_gpt2_config_ok(const vkg_ref_gpt2_config_t *cfg);

/* Element counts of the 16 tensors in table order. */
void vkg_ref_gpt2_param_sizes(const vkg_ref_gpt2_config_t *cfg,
                              size_t sizes[VKG_REF_GPT2_NUM_TENSORS]);

/* Element offset of each tensor in the contiguous array (running sum of the sizes). */
void vkg_ref_gpt2_param_offsets(const vkg_ref_gpt2_config_t *cfg,
                                size_t offsets[VKG_REF_GPT2_NUM_TENSORS]);

/* Total number of parameters (sum of the 16 sizes). */
size_t vkg_ref_gpt2_num_params(const vkg_ref_gpt2_config_t *cfg);

/* 1 for the tensors AdamW decays (0 wte, 1 wpe, 4 qkvw, 6 attprojw, 10 fcw, 12 fcprojw). */
int vkg_ref_gpt2_param_decays(int i);

#define VKG_REF_GPT2_DECLARE(real, sfx)                                                            \
    typedef struct vkg_ref_gpt2##sfx vkg_ref_gpt2##sfx##_t;                                        \
    /* The forward activations, llm.c's names and shapes; valid after a forward call. */           \
    typedef struct vkg_ref_gpt2_acts##sfx##_t {                                                    \
        real *encoded;             /* (B,T,C) */                                                   \
        real *ln1;                 /* (L,B,T,C) */                                                 \
        real *ln1_mean, *ln1_rstd; /* (L,B,T) */                                                   \
        real *qkv;                 /* (L,B,T,3C) */                                                \
        real *atty;                /* (L,B,T,C) */                                                 \
        real *lse;                 /* (L,B,NH,T): attention's row logsumexp */                     \
        real *attproj;             /* (L,B,T,C) */                                                 \
        real *residual2;           /* (L,B,T,C) */                                                 \
        real *ln2;                 /* (L,B,T,C) */                                                 \
        real *ln2_mean, *ln2_rstd; /* (L,B,T) */                                                   \
        real *fch;                 /* (L,B,T,4C) */                                                \
        real *fch_gelu;            /* (L,B,T,4C) */                                                \
        real *fcproj;              /* (L,B,T,C) */                                                 \
        real *residual3;           /* (L,B,T,C) */                                                 \
        real *lnf;                 /* (B,T,C) */                                                   \
        real *lnf_mean, *lnf_rstd; /* (B,T) */                                                     \
        real *logits;              /* (B,T,Vp) */                                                  \
        real *losses;              /* (B,T), valid after a forward with targets */                 \
    } vkg_ref_gpt2_acts##sfx##_t;                                                                  \
                                                                                                   \
    /* Fill params (num_params elements) with the GPT-2 init from a seeded generator: weights      \
     * normal(0, 0.02), attprojw and fcprojw scaled by 1/sqrt(2L), wte padding rows 0, biases 0,   \
     * layernorm weights 1. The float and double versions give the same values (rounded). */       \
    void vkg_ref_gpt2_init_params##sfx(const vkg_ref_gpt2_config_t *cfg, real *params,             \
                                       uint64_t seed);                                             \
    /* Create a model for batches of (B, T), 0 < T <= maxT, allocating its activations and         \
     * backward scratch. Returns 0 and sets *out, or -1 (bad config or shape, out of memory)       \
     * leaving *out NULL. Free with vkg_ref_gpt2_destroy. */                                       \
    int vkg_ref_gpt2_create##sfx(const vkg_ref_gpt2_config_t *cfg, int B, int T,                   \
                                 vkg_ref_gpt2##sfx##_t **out);                                     \
    /* Free the model; accepts NULL and *pm == NULL, sets *pm = NULL. */                           \
    void vkg_ref_gpt2_destroy##sfx(vkg_ref_gpt2##sfx##_t **pm);                                    \
    /* Forward pass with params (num_params), inputs (B,T) in [0,V). With targets (B,T) in         \
     * [0,V) it fills the per-position losses and returns their mean (double sum); with            \
     * targets NULL it returns -1 and backward may not be called. Inputs and targets are copied;   \
     * no pointer is kept. */                                                                      \
    double vkg_ref_gpt2_forward##sfx(vkg_ref_gpt2##sfx##_t *m, const real *params,                 \
                                     const int32_t *inputs, const int32_t *targets);               \
    /* Backward pass of the last forward (which must have had targets; params must be the same,    \
     * unchanged). ACCUMULATES into grads (num_params, same layout) the gradient of                \
     * grad_scale * mean loss, i.e. each position's loss derivative is grad_scale / (B*T):         \
     * 1 normally, 1/accum_steps when accumulating micro-batches. Logits and losses survive. */    \
    void vkg_ref_gpt2_backward##sfx(vkg_ref_gpt2##sfx##_t *m, const real *params, real *grads,     \
                                    double grad_scale);                                            \
    /* The last forward's activations (pointers owned by the model). */                            \
    const vkg_ref_gpt2_acts##sfx##_t *vkg_ref_gpt2_activations##sfx(                               \
        const vkg_ref_gpt2##sfx##_t *m);                                                           \
    /* Shortcuts: logits (B,T,Vp) and per-position losses (B,T) of the last forward. */            \
    const real *vkg_ref_gpt2_logits##sfx(const vkg_ref_gpt2##sfx##_t *m);                          \
    const real *vkg_ref_gpt2_losses##sfx(const vkg_ref_gpt2##sfx##_t *m);                          \
    /* Set all num_params gradients to 0. */                                                       \
    void vkg_ref_gpt2_zero_grad##sfx(const vkg_ref_gpt2_config_t *cfg, real *grads);               \
    /* sqrt of the sum of squares of all gradients, accumulated in double. */                      \
    double vkg_ref_gpt2_grad_norm##sfx(const vkg_ref_gpt2_config_t *cfg, const real *grads);       \
    /* One AdamW step t (1-based) over all 16 tensors with vkg_ref_adamw: gradients scaled by      \
     * grad_clip / norm when grad_clip > 0 and the global norm exceeds it; weight decay only on    \
     * the tensors vkg_ref_gpt2_param_decays names. Updates params, m and v (zero them before      \
     * step 1). Returns the global gradient norm before clipping. */                               \
    double vkg_ref_gpt2_adamw##sfx(const vkg_ref_gpt2_config_t *cfg, real *params,                 \
                                   const real *grads, real *m, real *v,                            \
                                   const vkg_ref_gpt2_adamw_t *hp, int t);

VKG_REF_GPT2_DECLARE(float, )
VKG_REF_GPT2_DECLARE(double, _f64)

#undef VKG_REF_GPT2_DECLARE

#endif
