/* Template of the reference GPT-2 declared in gpt2_ref.h, instantiated once per precision.
 *
 * The includer (gpt2_ref_f32.c, gpt2_ref_f64.c) includes the system headers, ref/ref.h and
 * ref/gpt2_ref.h, then defines `real` (float or double) and REF_SFX (empty or _f64) and includes
 * this file once. The math is llm.c's train_gpt2.c, expressed with the ops of ref.h; the only
 * state is the activations of one (B, T) shape and one layer's worth of activation gradients.
 * There is no include guard on purpose; this is not a public header.
 */
#if !defined(real) || !defined(REF_SFX)
#error "define real and REF_SFX before including gpt2_ref_impl.h"
#endif

#define REF_CAT_(a, b) a##b
#define REF_CAT(a, b) REF_CAT_(a, b)
#define REF_FN(name) REF_CAT(name, REF_SFX)
#define MODEL_T REF_CAT(REF_FN(vkg_ref_gpt2), _t)
#define ACTS_T REF_CAT(REF_FN(vkg_ref_gpt2_acts), _t)
#define NT VKG_REF_GPT2_NUM_TENSORS

struct REF_FN(vkg_ref_gpt2) {
    vkg_ref_gpt2_config_t cfg;
    int B, T;
    ACTS_T acts;      /* views into act_mem */
    real *act_mem;    /* every activation, one block */
    real *grad_mem;   /* the activation gradients below, one block */
    real *dres;       /* (B,T,C) gradient of the residual stream at the current layer boundary */
    real *dres2;      /* (B,T,C) gradient of residual2 of the current layer */
    real *dbranch;    /* (B,T,C) gradient of fcproj, then of attproj */
    real *dtmp;       /* (B,T,C) gradient of lnf, then ln2, atty, ln1 of each layer */
    real *dqkv;       /* (B,T,3C) */
    real *dfch_gelu;  /* (B,T,4C) */
    real *dfch;       /* (B,T,4C) */
    real *dlogits;    /* (B,T,Vp) */
    int32_t *inputs;  /* (B,T) copy of the last forward's inputs */
    int32_t *targets; /* (B,T) copy of the last forward's targets */
    int have_targets; /* the last forward had targets, so backward may run */
};

/* One layer's slice of the activations; `in` is the residual stream entering the layer. */
struct layer_acts {
    const real *in;
    real *ln1, *ln1_mean, *ln1_rstd, *qkv, *atty, *lse, *attproj, *residual2;
    real *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu, *fcproj, *residual3;
};

static void get_layer_acts(const MODEL_T *m, int l, struct layer_acts *la)
{
    const ACTS_T *a = &m->acts;
    size_t BT = (size_t)m->B * m->T, C = (size_t)m->cfg.C;
    size_t btc = BT * C, lbtc = (size_t)l * btc, lbt = (size_t)l * BT;
    la->in = l == 0 ? a->encoded : a->residual3 + lbtc - btc;
    la->ln1 = a->ln1 + lbtc;
    la->ln1_mean = a->ln1_mean + lbt;
    la->ln1_rstd = a->ln1_rstd + lbt;
    la->qkv = a->qkv + 3 * lbtc;
    la->atty = a->atty + lbtc;
    la->lse = a->lse + (size_t)l * m->B * m->cfg.NH * m->T;
    la->attproj = a->attproj + lbtc;
    la->residual2 = a->residual2 + lbtc;
    la->ln2 = a->ln2 + lbtc;
    la->ln2_mean = a->ln2_mean + lbt;
    la->ln2_rstd = a->ln2_rstd + lbt;
    la->fch = a->fch + 4 * lbtc;
    la->fch_gelu = a->fch_gelu + 4 * lbtc;
    la->fcproj = a->fcproj + lbtc;
    la->residual3 = a->residual3 + lbtc;
}

/* Offsets of the 16 tensors for layer l: per-layer tensors (2..13) point at layer l's slice. */
static void layer_offsets(const vkg_ref_gpt2_config_t *cfg, int l, size_t o[NT])
{
    size_t sizes[NT];
    vkg_ref_gpt2_param_sizes(cfg, sizes);
    vkg_ref_gpt2_param_offsets(cfg, o);
    for (int i = 2; i <= 13; i++)
        o[i] += (size_t)l * (sizes[i] / (size_t)cfg->L);
}

/* splitmix64 and Box-Muller: a self-contained generator so both precisions init identically. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_normal(uint64_t *s)
{
    double u1 = ((double)(rng_next(s) >> 11) + 1.0) * (1.0 / 9007199254740992.0); /* (0, 1] */
    double u2 = (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);         /* [0, 1) */
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void REF_FN(vkg_ref_gpt2_init_params)(const vkg_ref_gpt2_config_t *cfg, real *params, uint64_t seed)
{
    size_t sizes[NT], off[NT];
    vkg_ref_gpt2_param_sizes(cfg, sizes);
    vkg_ref_gpt2_param_offsets(cfg, off);
    uint64_t s = seed;
    double resid_std = 0.02 / sqrt(2.0 * cfg->L);
    for (int i = 0; i < NT; i++) {
        real *p = params + off[i];
        size_t n = i == 0 ? (size_t)cfg->V * (size_t)cfg->C : sizes[i]; /* wte padding rows: 0 */
        int is_weight = vkg_ref_gpt2_param_decays(i);
        int is_lnw = i == 2 || i == 8 || i == 14;
        double std = (i == 6 || i == 12) ? resid_std : 0.02;
        for (size_t j = 0; j < sizes[i]; j++)
            p[j] = (real)(is_weight && j < n ? std * rng_normal(&s) : is_lnw ? 1.0 : 0.0);
    }
}

/* A named buffer inside one block: where to store its pointer and its element count. */
struct slot {
    real **ptr;
    size_t n;
};

/* Allocate one zeroed block for all slots and point each slot into it; NULL when out of memory. */
static real *carve(struct slot *slots, size_t count)
{
    size_t total = 0;
    for (size_t i = 0; i < count; i++)
        total += slots[i].n;
    real *base = calloc(total ? total : 1, sizeof(real)), *p = base;
    for (size_t i = 0; base && i < count; i++) {
        *slots[i].ptr = p;
        p += slots[i].n;
    }
    return base;
}

int REF_FN(vkg_ref_gpt2_create)(const vkg_ref_gpt2_config_t *cfg, int B, int T, MODEL_T **out)
{
    if (!out)
        return -1;
    *out = NULL;
    if (!vkg_ref_gpt2_config_ok(cfg) || B <= 0 || T <= 0 || T > cfg->maxT)
        return -1;
    MODEL_T *m = calloc(1, sizeof *m);
    if (!m)
        return -1;
    m->cfg = *cfg;
    m->B = B;
    m->T = T;
    size_t BT = (size_t)B * T, C = (size_t)cfg->C, L = (size_t)cfg->L;
    size_t Vp = (size_t)cfg->Vp, NH = (size_t)cfg->NH;
    ACTS_T *a = &m->acts;
    struct slot acts[] = {
        {&a->encoded, BT * C},
        {&a->ln1, L * BT * C},
        {&a->ln1_mean, L * BT},
        {&a->ln1_rstd, L * BT},
        {&a->qkv, L * BT * 3 * C},
        {&a->atty, L * BT * C},
        {&a->lse, L * B * NH * T},
        {&a->attproj, L * BT * C},
        {&a->residual2, L * BT * C},
        {&a->ln2, L * BT * C},
        {&a->ln2_mean, L * BT},
        {&a->ln2_rstd, L * BT},
        {&a->fch, L * BT * 4 * C},
        {&a->fch_gelu, L * BT * 4 * C},
        {&a->fcproj, L * BT * C},
        {&a->residual3, L * BT * C},
        {&a->lnf, BT * C},
        {&a->lnf_mean, BT},
        {&a->lnf_rstd, BT},
        {&a->logits, BT * Vp},
        {&a->losses, BT},
    };
    struct slot grads[] = {
        {&m->dres, BT * C},     {&m->dres2, BT * C},    {&m->dbranch, BT * C},
        {&m->dtmp, BT * C},     {&m->dqkv, BT * 3 * C}, {&m->dfch_gelu, BT * 4 * C},
        {&m->dfch, BT * 4 * C}, {&m->dlogits, BT * Vp},
    };
    m->act_mem = carve(acts, sizeof acts / sizeof acts[0]);
    m->grad_mem = carve(grads, sizeof grads / sizeof grads[0]);
    m->inputs = calloc(BT, sizeof(int32_t));
    m->targets = calloc(BT, sizeof(int32_t));
    if (!m->act_mem || !m->grad_mem || !m->inputs || !m->targets) {
        REF_FN(vkg_ref_gpt2_destroy)(&m);
        return -1;
    }
    *out = m;
    return 0;
}

void REF_FN(vkg_ref_gpt2_destroy)(MODEL_T **pm)
{
    if (!pm || !*pm)
        return;
    MODEL_T *m = *pm;
    free(m->act_mem);
    free(m->grad_mem);
    free(m->inputs);
    free(m->targets);
    free(m);
    *pm = NULL;
}

double REF_FN(vkg_ref_gpt2_forward)(MODEL_T *m, const real *params, const int32_t *inputs,
                                    const int32_t *targets)
{
    const vkg_ref_gpt2_config_t *cfg = &m->cfg;
    int B = m->B, T = m->T, C = cfg->C, NH = cfg->NH, BT = m->B * m->T;
    ACTS_T *a = &m->acts;
    size_t o[NT];
    for (int i = 0; i < BT; i++)
        assert(inputs[i] >= 0 && inputs[i] < cfg->V);
    memcpy(m->inputs, inputs, (size_t)BT * sizeof *inputs);
    m->have_targets = 0;

    layer_offsets(cfg, 0, o);
    REF_FN(vkg_ref_encoder_fwd)(a->encoded, inputs, params + o[0], params + o[1], B, T, C);
    for (int l = 0; l < cfg->L; l++) {
        struct layer_acts la;
        get_layer_acts(m, l, &la);
        layer_offsets(cfg, l, o);
        REF_FN(vkg_ref_layernorm_fwd)
        (la.ln1, la.ln1_mean, la.ln1_rstd, la.in, params + o[2], params + o[3], BT, C);
        REF_FN(vkg_ref_matmul_fwd)(la.qkv, la.ln1, params + o[4], params + o[5], BT, C, 3 * C);
        REF_FN(vkg_ref_attention_fwd)(la.atty, la.lse, NULL, la.qkv, B, T, C, NH);
        REF_FN(vkg_ref_matmul_fwd)(la.attproj, la.atty, params + o[6], params + o[7], BT, C, C);
        REF_FN(vkg_ref_residual_fwd)(la.residual2, la.in, la.attproj, (size_t)BT * C);
        REF_FN(vkg_ref_layernorm_fwd)
        (la.ln2, la.ln2_mean, la.ln2_rstd, la.residual2, params + o[8], params + o[9], BT, C);
        REF_FN(vkg_ref_matmul_fwd)(la.fch, la.ln2, params + o[10], params + o[11], BT, C, 4 * C);
        REF_FN(vkg_ref_gelu_fwd)(la.fch_gelu, la.fch, (size_t)BT * 4 * C);
        REF_FN(vkg_ref_matmul_fwd)
        (la.fcproj, la.fch_gelu, params + o[12], params + o[13], BT, 4 * C, C);
        REF_FN(vkg_ref_residual_fwd)(la.residual3, la.residual2, la.fcproj, (size_t)BT * C);
    }
    const real *last = a->residual3 + (size_t)(cfg->L - 1) * BT * C;
    REF_FN(vkg_ref_layernorm_fwd)
    (a->lnf, a->lnf_mean, a->lnf_rstd, last, params + o[14], params + o[15], BT, C);
    REF_FN(vkg_ref_matmul_fwd)(a->logits, a->lnf, params + o[0], NULL, BT, C, cfg->Vp);
    if (!targets)
        return -1.0;

    for (int i = 0; i < BT; i++)
        assert(targets[i] >= 0 && targets[i] < cfg->V);
    memcpy(m->targets, targets, (size_t)BT * sizeof *targets);
    REF_FN(vkg_ref_xent_fwd_bwd)(a->losses, NULL, a->logits, targets, BT, cfg->V, cfg->Vp, 0);
    double sum = 0.0;
    for (int i = 0; i < BT; i++)
        sum += (double)a->losses[i];
    m->have_targets = 1;
    return sum / BT;
}

void REF_FN(vkg_ref_gpt2_backward)(MODEL_T *m, const real *params, real *grads, double grad_scale)
{
    const vkg_ref_gpt2_config_t *cfg = &m->cfg;
    int B = m->B, T = m->T, C = cfg->C, NH = cfg->NH, BT = m->B * m->T;
    size_t btc = (size_t)BT * C;
    const ACTS_T *a = &m->acts;
    size_t o[NT];
    assert(m->have_targets);

    /* logits -> lnf -> residual stream after the last layer */
    layer_offsets(cfg, 0, o);
    REF_FN(vkg_ref_xent_fwd_bwd)
    (NULL, m->dlogits, a->logits, m->targets, BT, cfg->V, cfg->Vp, (real)(grad_scale / BT));
    REF_FN(vkg_ref_fill)(m->dtmp, 0, btc);
    REF_FN(vkg_ref_matmul_bwd)
    (m->dtmp, grads + o[0], NULL, m->dlogits, a->lnf, params + o[0], BT, C, cfg->Vp);
    REF_FN(vkg_ref_fill)(m->dres, 0, btc);
    REF_FN(vkg_ref_layernorm_bwd)
    (m->dres, grads + o[14], grads + o[15], m->dtmp, a->residual3 + (size_t)(cfg->L - 1) * btc,
     params + o[14], a->lnf_mean, a->lnf_rstd, BT, C);

    for (int l = cfg->L - 1; l >= 0; l--) {
        struct layer_acts la;
        get_layer_acts(m, l, &la);
        layer_offsets(cfg, l, o);
        /* MLP branch: dres holds the gradient of residual3 */
        REF_FN(vkg_ref_fill)(m->dres2, 0, btc);
        REF_FN(vkg_ref_fill)(m->dbranch, 0, btc);
        REF_FN(vkg_ref_residual_bwd)(m->dres2, m->dbranch, m->dres, btc);
        REF_FN(vkg_ref_fill)(m->dfch_gelu, 0, 4 * btc);
        REF_FN(vkg_ref_matmul_bwd)
        (m->dfch_gelu, grads + o[12], grads + o[13], m->dbranch, la.fch_gelu, params + o[12], BT,
         4 * C, C);
        REF_FN(vkg_ref_fill)(m->dfch, 0, 4 * btc);
        REF_FN(vkg_ref_gelu_bwd)(m->dfch, la.fch, m->dfch_gelu, 4 * btc);
        REF_FN(vkg_ref_fill)(m->dtmp, 0, btc);
        REF_FN(vkg_ref_matmul_bwd)
        (m->dtmp, grads + o[10], grads + o[11], m->dfch, la.ln2, params + o[10], BT, C, 4 * C);
        REF_FN(vkg_ref_layernorm_bwd)
        (m->dres2, grads + o[8], grads + o[9], m->dtmp, la.residual2, params + o[8], la.ln2_mean,
         la.ln2_rstd, BT, C);
        /* attention branch: dres2 holds residual2's gradient; dres becomes the layer input's */
        REF_FN(vkg_ref_fill)(m->dres, 0, btc);
        REF_FN(vkg_ref_fill)(m->dbranch, 0, btc);
        REF_FN(vkg_ref_residual_bwd)(m->dres, m->dbranch, m->dres2, btc);
        REF_FN(vkg_ref_fill)(m->dtmp, 0, btc);
        REF_FN(vkg_ref_matmul_bwd)
        (m->dtmp, grads + o[6], grads + o[7], m->dbranch, la.atty, params + o[6], BT, C, C);
        REF_FN(vkg_ref_fill)(m->dqkv, 0, 3 * btc);
        REF_FN(vkg_ref_attention_bwd)(m->dqkv, m->dtmp, la.qkv, la.lse, B, T, C, NH);
        REF_FN(vkg_ref_fill)(m->dtmp, 0, btc);
        REF_FN(vkg_ref_matmul_bwd)
        (m->dtmp, grads + o[4], grads + o[5], m->dqkv, la.ln1, params + o[4], BT, C, 3 * C);
        REF_FN(vkg_ref_layernorm_bwd)
        (m->dres, grads + o[2], grads + o[3], m->dtmp, la.in, params + o[2], la.ln1_mean,
         la.ln1_rstd, BT, C);
    }
    REF_FN(vkg_ref_encoder_bwd)(grads + o[0], grads + o[1], m->dres, m->inputs, B, T, C);
}

const ACTS_T *REF_FN(vkg_ref_gpt2_activations)(const MODEL_T *m)
{
    return &m->acts;
}

const real *REF_FN(vkg_ref_gpt2_logits)(const MODEL_T *m)
{
    return m->acts.logits;
}

const real *REF_FN(vkg_ref_gpt2_losses)(const MODEL_T *m)
{
    return m->acts.losses;
}

void REF_FN(vkg_ref_gpt2_zero_grad)(const vkg_ref_gpt2_config_t *cfg, real *grads)
{
    REF_FN(vkg_ref_fill)(grads, 0, vkg_ref_gpt2_num_params(cfg));
}

double REF_FN(vkg_ref_gpt2_grad_norm)(const vkg_ref_gpt2_config_t *cfg, const real *grads)
{
    return sqrt(REF_FN(vkg_ref_sumsq)(grads, vkg_ref_gpt2_num_params(cfg)));
}

double REF_FN(vkg_ref_gpt2_adamw)(const vkg_ref_gpt2_config_t *cfg, real *params, const real *grads,
                                  real *m, real *v, const vkg_ref_gpt2_adamw_t *hp, int t)
{
    size_t sizes[NT], off[NT];
    vkg_ref_gpt2_param_sizes(cfg, sizes);
    vkg_ref_gpt2_param_offsets(cfg, off);
    double norm = REF_FN(vkg_ref_gpt2_grad_norm)(cfg, grads);
    double scale = hp->grad_clip > 0.0 && norm > hp->grad_clip ? hp->grad_clip / norm : 1.0;
    for (int i = 0; i < NT; i++) {
        double wd = vkg_ref_gpt2_param_decays(i) ? hp->weight_decay : 0.0;
        REF_FN(vkg_ref_adamw)
        (params + off[i], grads + off[i], m + off[i], v + off[i], sizes[i], (real)hp->lr,
         (real)hp->beta1, (real)hp->beta2, (real)hp->eps, (real)wd, t, (real)scale);
    }
    return norm;
}

#undef NT
#undef ACTS_T
#undef MODEL_T
#undef REF_FN
#undef REF_CAT
#undef REF_CAT_
