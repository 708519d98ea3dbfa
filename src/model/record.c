/* Recording a model part's passes into command lists, once: forward (llm.c's gpt2_forward over
 * the part's layers, with the family's norm, attention, positions and MLP), the fused softmax
 * cross-entropy (last part) and backward (gpt2_backward, accumulating into the gradients). Every op
 * comes from src/ops; barriers come from the command list. The optimizer's lists are src/optim's.
 */
#include "model/model_internal.h"

/* Layer l's slice of a per-layer tensor whose per-layer size is `per` elements. */
static vkg_tensor layer(vkg_tensor t, int l, size_t per)
{
    size_t e = vkg_dtype_bytes(t.dtype);
    return vkg_tensor_view(t, (size_t)l * per * e, per * e);
}

/* Role r's tensor in set (p, g or w): the part's whole tensor, or {0} where the family has none. */
static vkg_tensor pt(const vkg_model *m, const vkg_tensor *set, int r)
{
    return m->ix[r] >= 0 ? set[m->ix[r]] : (vkg_tensor){0};
}

/* Role r's slice for the part's layer l (the LAYER tensors are stacked over its layers), or {0}. */
static vkg_tensor lp(const vkg_model *m, const vkg_tensor *set, int r, int l)
{
    if (m->ix[r] < 0)
        return (vkg_tensor){0};
    size_t per = m->layout.count[m->ix[r]] / (size_t)m->nl;
    return layer(set[m->ix[r]], l, per);
}

/* A bias argument: NULL where the family has none. */
static const vkg_tensor *opt(const vkg_tensor *t)
{
    return t->bytes ? t : NULL;
}

/* The shapes of the recording: GPT-2's C, NH and the Llama family's key/value heads NKV, head
 * dimension D, the q/k/v product's width QKV, the attention's output width A = NH D, the MLP's
 * width F and its first product's FW (2F with SwiGLU). */
typedef struct dims {
    int B, T, BT, C, NH, NKV, D, QKV, A, F, FW, Vp;
    float eps;
} dims;

static dims dims_of(const vkg_model *m)
{
    const vkg_model_config *cfg = &m->cfg;
    dims d = {.B = m->opts.B,
              .T = m->opts.T,
              .BT = m->opts.B * m->opts.T,
              .C = cfg->channels,
              .NH = cfg->num_heads,
              .NKV = vkg_model_kv_heads(cfg),
              .D = vkg_model_head_dim(cfg),
              .F = vkg_model_mlp_hidden(cfg),
              .Vp = cfg->padded_vocab_size,
              .eps = vkg_model_norm_eps(cfg)};
    d.QKV = (d.NH + 2 * d.NKV) * d.D;
    d.A = d.NH * d.D;
    d.FW = (cfg->mlp == VKG_MLP_SWIGLU ? 2 : 1) * d.F;
    return d;
}

/* Where layer l's MLP activation is: its own slice, or with recomputation the one-layer buffer. */
static vkg_tensor gelu_out(const vkg_model *m, const vkg_model_acts *layers, int l)
{
    if (m->opts.recompute & VKG_MODEL_RECOMPUTE_GELU)
        return m->gelu;
    return layers[l].s.fch_gelu;
}

/* The gradient of the residual stream at layer l's output (l >= 0). */
static vkg_tensor dstream(const vkg_model *m, int l)
{
    return l % 2 ? m->gacts.s.dstream1 : m->gacts.s.dstream0;
}

/* ---- the family's choices: norm, MLP activation, attention ---- */

static vkg_status norm_fwd(const vkg_model *m, vkg_cmd *c, vkg_tensor out, vkg_tensor mean,
                           vkg_tensor rstd, vkg_tensor inp, vkg_tensor w, vkg_tensor b)
{
    dims d = dims_of(m);
    if (m->cfg.norm == VKG_NORM_RMS)
        return vkg_op_rmsnorm_fwd(c, out, rstd, inp, w, d.BT, d.C, d.eps);
    return vkg_op_layernorm_fwd(c, out, mean, rstd, inp, w, b, d.BT, d.C);
}

static vkg_status residual_norm_fwd(const vkg_model *m, vkg_cmd *c, vkg_tensor res, vkg_tensor out,
                                    vkg_tensor mean, vkg_tensor rstd, vkg_tensor a, vkg_tensor b,
                                    vkg_tensor w, vkg_tensor bias)
{
    dims d = dims_of(m);
    if (m->cfg.norm == VKG_NORM_RMS)
        return vkg_op_residual_rmsnorm_fwd(c, res, out, rstd, a, b, w, d.BT, d.C, d.eps);
    return vkg_op_residual_layernorm_fwd(c, res, out, mean, rstd, a, b, w, bias, d.BT, d.C);
}

static vkg_status norm_bwd(const vkg_model *m, vkg_cmd *c, vkg_tensor dinp, vkg_tensor dw,
                           vkg_tensor db, vkg_tensor dout, vkg_tensor inp, vkg_tensor w,
                           vkg_tensor mean, vkg_tensor rstd)
{
    dims d = dims_of(m);
    if (m->cfg.norm == VKG_NORM_RMS)
        return vkg_op_rmsnorm_bwd(c, dinp, dw, dout, inp, w, rstd, d.BT, d.C);
    return vkg_op_layernorm_bwd(c, dinp, dw, db, dout, inp, w, mean, rstd, d.BT, d.C);
}

/* The MLP's activation of fch into act (GELU, SwiGLU over fch's gate and up halves, ReLU^2). */
static vkg_status mlp_act_fwd(const vkg_model *m, vkg_cmd *c, vkg_tensor act, vkg_tensor fch)
{
    dims d = dims_of(m);
    size_t n = (size_t)d.BT * (size_t)d.F;
    if (m->cfg.mlp == VKG_MLP_SWIGLU)
        return vkg_op_swiglu_fwd(c, act, fch, d.BT, d.F);
    if (m->cfg.mlp == VKG_MLP_RELU2)
        return vkg_op_relu2_fwd(c, act, fch, n);
    return vkg_op_gelu_fwd(c, act, fch, n);
}

static vkg_status mlp_act_bwd(const vkg_model *m, vkg_cmd *c, vkg_tensor dfch, vkg_tensor fch,
                              vkg_tensor dact)
{
    dims d = dims_of(m);
    size_t n = (size_t)d.BT * (size_t)d.F;
    if (m->cfg.mlp == VKG_MLP_SWIGLU)
        return vkg_op_swiglu_bwd(c, dfch, fch, dact, d.BT, d.F);
    if (m->cfg.mlp == VKG_MLP_RELU2)
        return vkg_op_relu2_bwd(c, dfch, fch, dact, n);
    return vkg_op_gelu_bwd(c, dfch, fch, dact, n);
}

/* GPT-2's attention op (its kernels, as before the families), or grouped-query attention. */
static int gpt2_attention(const vkg_model *m)
{
    return vkg_model_is_gpt2(&m->cfg);
}

/* The gradient activations that the input pass keeps per slot and layer, in the order of a slot's
 * `kept`: dfcproj, dfch, dattproj and the q/k/v product's output gradient (dqkv, or with QK-norm
 * dqkvr). */
static int kept_gact(const vkg_model *m, int k)
{
    static const int g[VKG_MODEL_NUM_KEPT] = {9, 7, 4, 2};
    return k == 3 && m->cfg.qk_norm ? 13 : g[k];
}

/* Zero what layer l's backward adds into: its gradients of the activations (shared by the
 * layers; the products' output gradients in `kept`, when given, instead) and the residual stream's
 * gradient at its input. One group: the fills are independent; the barrier before it orders them
 * after the layer above. */
static vkg_status zero_layer_grads(vkg_model *m, vkg_cmd *c, int l, const vkg_tensor *kept)
{
    vkg_cmd_group_begin(c);
    for (int i = 1; i <= VKG_MODEL_NUM_LAYER_GRADS + 4; i++) {
        if (i > VKG_MODEL_NUM_LAYER_GRADS && (i != 13 || !m->cfg.qk_norm))
            continue; /* dqkvr: QK-norm's */
        vkg_tensor t = m->gacts.t[i];
        for (int k = 0; kept && k < VKG_MODEL_NUM_KEPT; k++)
            if (kept_gact(m, k) == i)
                t = kept[k];
        VKG_TRY(vkg_op_fill(c, t, t.bytes / 4, 0.0f));
    }
    if (l > 0)
        VKG_TRY(vkg_op_fill(c, dstream(m, l - 1), dstream(m, l - 1).bytes / 4, 0.0f));
    vkg_cmd_group_end(c);
    return VKG_OK;
}

/* Zero what the backward adds into before the layers: dencoded, and with the head dlnf and the
 * residual stream's gradient at the last layer's output. */
static vkg_status zero_top_grads(vkg_model *m, vkg_cmd *c)
{
    const vkg_model_grad_acts *d = &m->gacts;
    vkg_cmd_group_begin(c);
    VKG_TRY(vkg_op_fill(c, d->s.dencoded, d->s.dencoded.bytes / 4, 0.0f));
    if (m->head) {
        VKG_TRY(vkg_op_fill(c, d->s.dlnf, d->s.dlnf.bytes / 4, 0.0f));
        VKG_TRY(vkg_op_fill(c, dstream(m, m->nl - 1), dstream(m, m->nl - 1).bytes / 4, 0.0f));
    }
    vkg_cmd_group_end(c);
    return VKG_OK;
}

/* The residual add res = a + b closing layer l, fused with the norm that follows it: the next
 * layer's ln1, or with the head lnf; the last layer of a part without the head has none. */
static vkg_status record_residual_out(vkg_model *m, int s, vkg_cmd *c, int l, vkg_tensor a,
                                      vkg_tensor b)
{
    const vkg_model_acts *a0 = &m->slots[s].acts;
    const vkg_model_acts *next = l + 1 < m->nl ? &m->slots[s].layers[l + 1] : NULL;
    vkg_tensor res = m->slots[s].layers[l].s.residual3;
    dims d = dims_of(m);
    if (next)
        return residual_norm_fwd(m, c, res, next->s.ln1, next->s.ln1_mean, next->s.ln1_rstd, a, b,
                                 lp(m, m->p, LN1W, l + 1), lp(m, m->p, LN1B, l + 1));
    if (m->head)
        return residual_norm_fwd(m, c, res, a0->s.lnf, a0->s.lnf_mean, a0->s.lnf_rstd, a, b,
                                 pt(m, m->p, LNFW), pt(m, m->p, LNFB));
    return vkg_op_residual_fwd(c, res, a, b, (size_t)d.BT * d.C);
}

/* Layer l's attention block from its ln1 to attproj: the q/k/v product (into qkvr with QK-norm,
 * normed into qkv), the rotation of q and k in place (rotary models), attention, the output
 * product. */
static vkg_status record_attention_fwd(vkg_model *m, vkg_cmd *c, const vkg_model_acts *la, int l)
{
    dims d = dims_of(m);
    vkg_tensor b_qkv = lp(m, m->p, QKVB, l), b_att = lp(m, m->p, ATTPROJB, l);
    vkg_tensor prod = m->cfg.qk_norm ? la->s.qkvr : la->s.qkv;
    VKG_TRY(vkg_op_matmul_fwd(c, prod, la->s.ln1, lp(m, m->w, QKVW, l), opt(&b_qkv), d.BT, d.C,
                              d.QKV, m->mm_scratch));
    if (m->cfg.qk_norm)
        VKG_TRY(vkg_op_qknorm_fwd(c, la->s.qkv, la->s.qk_rstd, la->s.qkvr, lp(m, m->p, QNORMW, l),
                                  lp(m, m->p, KNORMW, l), d.B, d.T, d.NH, d.NKV, d.D, d.eps));
    if (m->cfg.pos == VKG_POS_ROPE)
        VKG_TRY(vkg_op_rope_fwd(c, la->s.qkv, m->inv_freq, d.B, d.T, d.NH, d.NKV, d.D));
    if (gpt2_attention(m))
        VKG_TRY(vkg_op_attention_fwd(c, la->s.atty, la->s.lse, la->s.qkv, d.B, d.T, d.C, d.NH));
    else
        VKG_TRY(vkg_op_attention_gqa_fwd(c, la->s.atty, la->s.lse, la->s.qkv, d.B, d.T, d.NH, d.NKV,
                                         d.D));
    return vkg_op_matmul_fwd(c, la->s.attproj, la->s.atty, lp(m, m->w, ATTPROJW, l), opt(&b_att),
                             d.BT, d.A, d.C, m->mm_scratch);
}

/* The forward pass. Fused where one kernel does two ops with their bits: each residual add with
 * the norm after it (layernorm_fwd.comp, rmsnorm_fwd.comp RESIDUAL), GPT-2's fc product with its
 * GELU (the matmul kernels' GELU epilogue). */
static vkg_status record_forward(vkg_model *m, int s, vkg_cmd *c)
{
    const vkg_model_acts *a = &m->slots[s].acts;
    dims d = dims_of(m);
    if (m->opts.precision == VKG_PRECISION_BF16) /* the weights the products read this pass */
        VKG_TRY(vkg_op_cast_bf16(c, m->params16, m->params, m->nparams));
    if (m->embed && m->ix[WPE] >= 0) /* otherwise encoded is the input boundary */
        VKG_TRY(vkg_op_encoder_fwd(c, a->s.encoded, m->slots[s].inputs, pt(m, m->p, WTE),
                                   pt(m, m->p, WPE), d.B, d.T, d.C));
    else if (m->embed) /* rotary models: the positions enter in attention */
        VKG_TRY(
            vkg_op_embed_fwd(c, a->s.encoded, m->slots[s].inputs, pt(m, m->p, WTE), d.B, d.T, d.C));
    const vkg_model_acts *l0 = &m->slots[s].layers[0];
    VKG_TRY(norm_fwd(m, c, l0->s.ln1, l0->s.ln1_mean, l0->s.ln1_rstd, a->s.encoded,
                     lp(m, m->p, LN1W, 0), lp(m, m->p, LN1B, 0)));
    for (int l = 0; l < m->nl; l++) {
        const vkg_model_acts *la = &m->slots[s].layers[l];
        vkg_tensor residual = l == 0 ? a->s.encoded : m->slots[s].layers[l - 1].s.residual3;
        vkg_tensor fchg = gelu_out(m, m->slots[s].layers, l);
        vkg_tensor b_fc = lp(m, m->p, FCB, l), b_fcp = lp(m, m->p, FCPROJB, l);
        VKG_TRY(record_attention_fwd(m, c, la, l));
        VKG_TRY(residual_norm_fwd(m, c, la->s.residual2, la->s.ln2, la->s.ln2_mean, la->s.ln2_rstd,
                                  residual, la->s.attproj, lp(m, m->p, LN2W, l),
                                  lp(m, m->p, LN2B, l)));
        if (m->cfg.mlp == VKG_MLP_GELU) {
            VKG_TRY(vkg_op_matmul_fwd_gelu(c, la->s.fch, fchg, la->s.ln2, lp(m, m->w, FCW, l),
                                           opt(&b_fc), d.BT, d.C, d.F, m->mm_scratch));
        } else {
            VKG_TRY(vkg_op_matmul_fwd(c, la->s.fch, la->s.ln2, lp(m, m->w, FCW, l), opt(&b_fc),
                                      d.BT, d.C, d.FW, m->mm_scratch));
            VKG_TRY(mlp_act_fwd(m, c, fchg, la->s.fch));
        }
        VKG_TRY(vkg_op_matmul_fwd(c, la->s.fcproj, fchg, lp(m, m->w, FCPROJW, l), opt(&b_fcp), d.BT,
                                  d.F, d.C, m->mm_scratch));
        VKG_TRY(record_residual_out(m, s, c, l, la->s.residual2, la->s.fcproj));
    }
    if (!m->head) /* the output boundary is the last layer's residual3 */
        return VKG_OK;
    return vkg_op_matmul_fwd(c, a->s.logits, a->s.lnf, pt(m, m->w, vkg__model_classifier(m)), NULL,
                             d.BT, d.C, d.Vp, m->mm_scratch);
}

/* The training forward: forward, then (last part) the loss with dlogits in place of the logits. */
static vkg_status record_forward_train(vkg_model *m, int s, vkg_cmd *c)
{
    const vkg_model_slot *sl = &m->slots[s];
    int BT = m->opts.B * m->opts.T, V = m->cfg.vocab_size, Vp = m->cfg.padded_vocab_size;
    float dloss = m->opts.loss_scale / ((float)BT * (float)m->opts.accum_steps);
    VKG_TRY(record_forward(m, s, c));
    if (!m->head)
        return VKG_OK;
    return vkg_op_xent_fwd_bwd_scaled(c, sl->acts.s.losses, &sl->acts.s.logits, sl->acts.s.logits,
                                      sl->targets, BT, V, Vp, dloss, &m->dscale);
}

/* Advance the cut: unit u is complete. */
static vkg_status unit_done(vkg__model_cut_fn cut, void *ctx, vkg_cmd **pc, int *u)
{
    vkg_status st = cut ? cut(ctx, pc, *u) : VKG_OK;
    (*u)++;
    return st;
}

/* Layer l's product backward for weight role w: the input gradient, and unless the input pass
 * keeps the output gradient for the weight pass (kept), the weight and bias gradients in the same
 * call, as vkg_op_matmul_bwd gives them (dbias: NULL where the family has no bias). */
static vkg_status product_bwd(vkg_model *m, vkg_cmd *c, const vkg_tensor *kept, vkg_tensor dinp,
                              int w, int bias, vkg_tensor dout, vkg_tensor inp, int l, int N,
                              int Cin, int OC)
{
    vkg_tensor gb = lp(m, m->g, bias, l);
    if (kept)
        return vkg_op_matmul_bwd_dinp(c, dinp, dout, lp(m, m->w, w, l), N, Cin, OC);
    return vkg_op_matmul_bwd(c, dinp, lp(m, m->g, w, l), opt(&gb), dout, inp, lp(m, m->w, w, l), N,
                             Cin, OC, &m->mm_scratch);
}

/* The weight pass's half of product_bwd. */
static vkg_status product_bwd_weight(vkg_model *m, vkg_cmd *c, int w, int bias, vkg_tensor dout,
                                     vkg_tensor inp, int l, int N, int Cin, int OC)
{
    vkg_tensor gb = lp(m, m->g, bias, l);
    return vkg_op_matmul_bwd_dweight(c, lp(m, m->g, w, l), opt(&gb), dout, inp, N, Cin, OC,
                                     &m->mm_scratch);
}

/* Layer l's attention block backward, from dattproj to dln1: the output product, attention, the
 * rotation undone (rotary models), QK-norm (into dqkvr), the q/k/v product. */
static vkg_status record_attention_bwd(vkg_model *m, vkg_cmd *c, const vkg_model_acts *la, int l,
                                       const vkg_tensor *kept, vkg_tensor dattproj)
{
    const vkg_model_grad_acts *g = &m->gacts;
    dims d = dims_of(m);
    vkg_tensor dqkv = g->s.dqkv, dprod = m->cfg.qk_norm ? g->s.dqkvr : g->s.dqkv;
    if (kept)
        dprod = kept[3];
    if (kept && !m->cfg.qk_norm)
        dqkv = kept[3];
    VKG_TRY(product_bwd(m, c, kept, g->s.datty, ATTPROJW, ATTPROJB, dattproj, la->s.atty, l, d.BT,
                        d.A, d.C));
    if (gpt2_attention(m))
        VKG_TRY(vkg_op_attention_bwd(c, dqkv, g->s.datty, la->s.qkv, la->s.atty, la->s.lse, d.B,
                                     d.T, d.C, d.NH, m->delta));
    else
        VKG_TRY(vkg_op_attention_gqa_bwd(c, dqkv, g->s.datty, la->s.qkv, la->s.atty, la->s.lse, d.B,
                                         d.T, d.NH, d.NKV, d.D, m->delta));
    if (m->cfg.pos == VKG_POS_ROPE)
        VKG_TRY(vkg_op_rope_bwd(c, dqkv, m->inv_freq, d.B, d.T, d.NH, d.NKV, d.D));
    if (m->cfg.qk_norm)
        VKG_TRY(vkg_op_qknorm_bwd(c, dprod, lp(m, m->g, QNORMW, l), lp(m, m->g, KNORMW, l), dqkv,
                                  la->s.qkvr, lp(m, m->p, QNORMW, l), lp(m, m->p, KNORMW, l),
                                  la->s.qk_rstd, d.B, d.T, d.NH, d.NKV, d.D));
    return product_bwd(m, c, kept, g->s.dln1, QKVW, QKVB, dprod, la->s.ln1, l, d.BT, d.C, d.QKV);
}

/* The backward pass of slot s. cut (may be NULL) is called after each gradient unit is complete
 * (see vkg_model_unit_ranges; the last unit ends with the list) and may end the current list and
 * continue in another (*pc). With cut, the classifier's weight gradient comes before its input
 * gradient, so that its unit closes as early as possible, and (whole model with a tied embedding)
 * the encoder's contribution to it is not recorded: the caller sums the rows of dencoded per
 * token itself. */
enum { PASS_ALL, PASS_INPUT }; /* the whole backward, or its input pass (split_w) */

static vkg_status record_backward_cut(vkg_model *m, int s, int pass, vkg_cmd **pc,
                                      vkg__model_cut_fn cut, void *ctx)
{
    const vkg_model_slot *sl = &m->slots[s];
    const vkg_model_acts *a = &sl->acts;
    const vkg_model_grad_acts *d = &m->gacts;
    dims dm = dims_of(m);
    int B = dm.B, T = dm.T, C = dm.C, L = m->nl, Vp = dm.Vp, BT = dm.BT, u = 0;
    size_t btc = (size_t)BT * C;
    vkg_tensor cls_w = pt(m, m->w, vkg__model_classifier(m));
    vkg_tensor cls_g = pt(m, m->g, vkg__model_classifier(m));
    VKG_TRY(zero_top_grads(m, *pc));
    if (m->head) { /* logits now hold dlogits (written by the loss) */
        if (pass == PASS_INPUT) {
            VKG_TRY(vkg_op_matmul_bwd_dinp(*pc, d->s.dlnf, a->s.logits, cls_w, BT, C, Vp));
            u++;
        } else if (cut) {
            VKG_TRY(vkg_op_matmul_bwd_dweight(*pc, cls_g, NULL, a->s.logits, a->s.lnf, BT, C, Vp,
                                              &m->mm_scratch));
            VKG_TRY(unit_done(cut, ctx, pc, &u));
            VKG_TRY(vkg_op_matmul_bwd_dinp(*pc, d->s.dlnf, a->s.logits, cls_w, BT, C, Vp));
        } else {
            VKG_TRY(vkg_op_matmul_bwd(*pc, d->s.dlnf, cls_g, NULL, a->s.logits, a->s.lnf, cls_w, BT,
                                      C, Vp, &m->mm_scratch));
            u++;
        }
        VKG_TRY(norm_bwd(m, *pc, dstream(m, L - 1), pt(m, m->g, LNFW), pt(m, m->g, LNFB), d->s.dlnf,
                         m->slots[s].layers[L - 1].s.residual3, pt(m, m->p, LNFW), a->s.lnf_mean,
                         a->s.lnf_rstd));
        VKG_TRY(unit_done(cut, ctx, pc, &u));
    }
    for (int l = L - 1; l >= 0; l--) {
        vkg_cmd *c = *pc;
        const vkg_model_acts *la = &m->slots[s].layers[l];
        vkg_tensor residual = l == 0 ? a->s.encoded : m->slots[s].layers[l - 1].s.residual3;
        vkg_tensor dresidual = l == 0 ? d->s.dencoded : dstream(m, l - 1);
        vkg_tensor dres3 = l == L - 1 && !m->head ? m->dtop : dstream(m, l);
        vkg_tensor dres2 = d->s.dresidual2, dfcproj = d->s.dfcproj, dfchg = d->s.dfch_gelu;
        vkg_tensor dfch = d->s.dfch, dln2 = d->s.dln2, dattproj = d->s.dattproj;
        vkg_tensor fchg = gelu_out(m, m->slots[s].layers, l);
        const vkg_tensor *kept = pass == PASS_INPUT ? &sl->kept[l * VKG_MODEL_NUM_KEPT] : NULL;
        if (kept) /* the products' output gradients, kept for the weight pass */
            dfcproj = kept[0], dfch = kept[1], dattproj = kept[2];
        VKG_TRY(zero_layer_grads(m, c, l, kept));
        if (!kept && m->opts.recompute & VKG_MODEL_RECOMPUTE_GELU)
            VKG_TRY(mlp_act_fwd(m, c, fchg, la->s.fch));
        VKG_TRY(vkg_op_residual_bwd(c, dres2, dfcproj, dres3, btc));
        VKG_TRY(product_bwd(m, c, kept, dfchg, FCPROJW, FCPROJB, dfcproj, fchg, l, BT, dm.F, C));
        VKG_TRY(mlp_act_bwd(m, c, dfch, la->s.fch, dfchg));
        VKG_TRY(product_bwd(m, c, kept, dln2, FCW, FCB, dfch, la->s.ln2, l, BT, C, dm.FW));
        VKG_TRY(norm_bwd(m, c, dres2, lp(m, m->g, LN2W, l), lp(m, m->g, LN2B, l), dln2,
                         la->s.residual2, lp(m, m->p, LN2W, l), la->s.ln2_mean, la->s.ln2_rstd));
        VKG_TRY(vkg_op_residual_bwd(c, dresidual, dattproj, dres2, btc));
        VKG_TRY(record_attention_bwd(m, c, la, l, kept, dattproj));
        VKG_TRY(norm_bwd(m, c, dresidual, lp(m, m->g, LN1W, l), lp(m, m->g, LN1B, l), d->s.dln1,
                         residual, lp(m, m->p, LN1W, l), la->s.ln1_mean, la->s.ln1_rstd));
        if (l > 0 || vkg__model_embed_unit(m)) /* the last unit is not announced */
            VKG_TRY(unit_done(cut, ctx, pc, &u));
    }
    if (!m->embed) /* dencoded holds the gradient of the input boundary */
        return VKG_OK;
    int wpe = m->ix[WPE] >= 0;
    if (cut && m->head && m->table.tied >= 0) /* the whole model's split: the caller adds wte's */
        return wpe ? vkg_op_encoder_bwd_wpe(*pc, pt(m, m->g, WPE), d->s.dencoded, B, T, C) : VKG_OK;
    if (!wpe)
        return vkg_op_encoder_bwd_wte(*pc, pt(m, m->g, WTE), d->s.dencoded, sl->inputs, B, T, C);
    return vkg_op_encoder_bwd(*pc, pt(m, m->g, WTE), pt(m, m->g, WPE), d->s.dencoded, sl->inputs, B,
                              T, C);
}

/* The weight pass of slot s (split_w): the products' weight and bias gradients from the output
 * gradients its input pass kept, with the arguments vkg_op_matmul_bwd gives them in the whole
 * backward, so that each adds the same values. */
static vkg_status record_backward_weight(vkg_model *m, int s, vkg_cmd *c)
{
    const vkg_model_slot *sl = &m->slots[s];
    const vkg_model_acts *a = &sl->acts;
    dims d = dims_of(m);
    if (m->head)
        VKG_TRY(vkg_op_matmul_bwd_dweight(c, pt(m, m->g, vkg__model_classifier(m)), NULL,
                                          a->s.logits, a->s.lnf, d.BT, d.C, d.Vp, &m->mm_scratch));
    for (int l = m->nl - 1; l >= 0; l--) {
        const vkg_model_acts *la = &sl->layers[l];
        const vkg_tensor *kept = &sl->kept[l * VKG_MODEL_NUM_KEPT];
        vkg_tensor fchg = gelu_out(m, sl->layers, l);
        if (m->opts.recompute & VKG_MODEL_RECOMPUTE_GELU)
            VKG_TRY(mlp_act_fwd(m, c, fchg, la->s.fch));
        VKG_TRY(product_bwd_weight(m, c, FCPROJW, FCPROJB, kept[0], fchg, l, d.BT, d.F, d.C));
        VKG_TRY(product_bwd_weight(m, c, FCW, FCB, kept[1], la->s.ln2, l, d.BT, d.C, d.FW));
        VKG_TRY(
            product_bwd_weight(m, c, ATTPROJW, ATTPROJB, kept[2], la->s.atty, l, d.BT, d.A, d.C));
        VKG_TRY(product_bwd_weight(m, c, QKVW, QKVB, kept[3], la->s.ln1, l, d.BT, d.C, d.QKV));
    }
    return VKG_OK;
}

vkg_status vkg__model_record_backward_cut(vkg_model *m, int s, vkg_cmd **pc, vkg__model_cut_fn cut,
                                          void *ctx)
{
    return record_backward_cut(m, s, PASS_ALL, pc, cut, ctx);
}

vkg_status vkg__model_record_fwdbwd_cut(vkg_model *m, int s, vkg_cmd **pc, vkg__model_cut_fn cut,
                                        void *ctx)
{
    VKG_TRY(record_forward_train(m, s, *pc));
    return record_backward_cut(m, s, PASS_ALL, pc, cut, ctx);
}

static vkg_status record_list(vkg_model *m, int s, int which)
{
    vkg_cmd *c = m->slots[s].lists[which];
    const vkg_model_slot *sl = &m->slots[s];
    int BT = m->opts.B * m->opts.T, V = m->cfg.vocab_size, Vp = m->cfg.padded_vocab_size;
    VKG_TRY(vkg_cmd_begin(c));
    /* A part's boundaries come from and go to the host through copies in its lists (devices
     * without unified memory; nothing is recorded otherwise). */
    int fwd =
        which == VKG_MODEL_LIST_FWD || which == VKG_MODEL_LIST_EVAL || which == VKG_MODEL_LIST_FWDT;
    if (fwd && !m->embed)
        VKG_TRY(vkg__model_record_boundary(m, c, VKG_MODEL_IN, s));
    int bwd = which == VKG_MODEL_LIST_BWD || which == VKG_MODEL_LIST_BWD_IN;
    if (bwd && !m->head)
        VKG_TRY(vkg__model_record_boundary(m, c, VKG_MODEL_DOUT, s));
    switch (which) {
    case VKG_MODEL_LIST_FWD:
        VKG_TRY(record_forward(m, s, c));
        break;
    case VKG_MODEL_LIST_EVAL:
        VKG_TRY(record_forward(m, s, c));
        if (m->head)
            VKG_TRY(vkg_op_xent_fwd_bwd(c, sl->acts.s.losses, NULL, sl->acts.s.logits, sl->targets,
                                        BT, V, Vp, 1.0f));
        break;
    case VKG_MODEL_LIST_FWDT:
        VKG_TRY(record_forward_train(m, s, c));
        break;
    case VKG_MODEL_LIST_BWD:
        VKG_TRY(record_backward_cut(m, s, PASS_ALL, &c, NULL, NULL));
        break;
    case VKG_MODEL_LIST_BWD_IN:
        VKG_TRY(record_backward_cut(m, s, PASS_INPUT, &c, NULL, NULL));
        break;
    case VKG_MODEL_LIST_BWD_W:
        VKG_TRY(record_backward_weight(m, s, c));
        break;
    case VKG_MODEL_LIST_FWDBWD:
        VKG_TRY(vkg__model_record_fwdbwd_cut(m, s, &c, NULL, NULL));
        break;
    default:
        return VKG_FAIL(VKG_ERR_INVALID_ARG, "no command list %d", which);
    }
    if (fwd && !m->head)
        VKG_TRY(vkg__model_record_boundary(m, c, VKG_MODEL_OUT, s));
    if (bwd && !m->embed)
        VKG_TRY(vkg__model_record_boundary(m, c, VKG_MODEL_DIN, s));
    return vkg_cmd_end(c);
}

vkg_status vkg__model_record(vkg_model *m)
{
    for (int s = 0; s < m->opts.slots; s++)
        for (int i = 0; i < VKG_MODEL_NUM_LISTS; i++) {
            if (!m->opts.split_w && (i == VKG_MODEL_LIST_BWD_IN || i == VKG_MODEL_LIST_BWD_W))
                continue;
            VKG_TRY(vkg_cmd_create(m->dev, &m->slots[s].lists[i]));
            VKG_TRY(record_list(m, s, i));
        }
    /* Parameters and gradients start at zero. */
    VKG_TRY(vkg_cmd_create(m->dev, &m->zero));
    vkg_cmd *c = m->zero;
    VKG_TRY(vkg_cmd_begin(c));
    VKG_TRY(vkg_op_fill(c, m->params, m->nparams, 0.0f));
    VKG_TRY(vkg_op_fill(c, m->grads, m->nparams, 0.0f));
    VKG_TRY(vkg_op_fill(c, m->dscale, 1, 1.0f));
    VKG_TRY(vkg_cmd_end(c));
    VKG_TRY(vkg_cmd_run(c, 0));
    VKG_TRY(vkg_cmd_begin(c));
    VKG_TRY(vkg_op_fill(c, m->grads, m->nparams, 0.0f));
    return vkg_cmd_end(c);
}
