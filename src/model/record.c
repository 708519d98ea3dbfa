/* Recording a GPT-2 part's passes into command lists, once: forward (llm.c's gpt2_forward over
 * the part's layers), the fused softmax cross-entropy (last part) and backward (gpt2_backward,
 * accumulating into the gradients). Every op comes from src/ops; barriers come from the command
 * list. The optimizer's lists are src/optim's. */
#include "model/model_internal.h"

/* Layer l's slice of a per-layer tensor whose per-layer size is `per` elements. */
static vkg_tensor layer(vkg_tensor t, int l, size_t per)
{
    size_t e = vkg_dtype_bytes(t.dtype);
    return vkg_tensor_view(t, (size_t)l * per * e, per * e);
}

/* Parameter tensor i's slice for the part's layer l (tensors 2..13 are stacked over its layers). */
static vkg_tensor lp(const vkg_model *m, const vkg_tensor *set, int i, int l)
{
    size_t per = m->layout.count[i] / (size_t)m->nl;
    return layer(set[i], l, per);
}

/* Where layer l's GELU output is: its own slice, or with recomputation the one-layer buffer. */
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

/* The gradient activations that the input pass keeps per slot and layer, in the order of a slot's
 * `kept`: dfcproj, dfch, dattproj, dqkv. */
static const int kept_gact[VKG_MODEL_NUM_KEPT] = {9, 7, 4, 2};

/* Zero what layer l's backward adds into: its gradients of the activations (shared by the
 * layers; the products' output gradients in `kept`, when given, instead) and the residual stream's
 * gradient at its input. One group: the fills are independent; the barrier before it orders them
 * after the layer above. */
static vkg_status zero_layer_grads(vkg_model *m, vkg_cmd *c, int l, const vkg_tensor *kept)
{
    vkg_cmd_group_begin(c);
    for (int i = 1; i <= VKG_MODEL_NUM_LAYER_GRADS; i++) {
        vkg_tensor t = m->gacts.t[i];
        for (int k = 0; kept && k < VKG_MODEL_NUM_KEPT; k++)
            if (kept_gact[k] == i)
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

/* The residual add res = a + b closing layer l, fused with the layernorm that follows it: the
 * next layer's ln1, or with the head lnf; the last layer of a part without the head has none. */
static vkg_status record_residual_out(vkg_model *m, int s, vkg_cmd *c, int l, vkg_tensor a,
                                      vkg_tensor b)
{
    const vkg_model_acts *a0 = &m->slots[s].acts;
    const vkg_model_acts *next = l + 1 < m->nl ? &m->slots[s].layers[l + 1] : NULL;
    vkg_tensor res = m->slots[s].layers[l].s.residual3;
    int BT = m->opts.B * m->opts.T, C = m->cfg.channels;
    if (next)
        return vkg_op_residual_layernorm_fwd(c, res, next->s.ln1, next->s.ln1_mean,
                                             next->s.ln1_rstd, a, b, lp(m, m->p, LN1W, l + 1),
                                             lp(m, m->p, LN1B, l + 1), BT, C);
    if (m->head)
        return vkg_op_residual_layernorm_fwd(c, res, a0->s.lnf, a0->s.lnf_mean, a0->s.lnf_rstd, a,
                                             b, m->p[LNFW], m->p[LNFB], BT, C);
    return vkg_op_residual_fwd(c, res, a, b, (size_t)BT * C);
}

/* The forward pass. Fused where one kernel does two ops with their bits: each residual add with
 * the layernorm after it (layernorm_fwd.comp RESIDUAL), the fc product with its GELU (the matmul
 * kernels' GELU epilogue). */
static vkg_status record_forward(vkg_model *m, int s, vkg_cmd *c)
{
    const vkg_model_acts *a = &m->slots[s].acts;
    int B = m->opts.B, T = m->opts.T, C = m->cfg.channels, NH = m->cfg.num_heads;
    int L = m->nl, Vp = m->cfg.padded_vocab_size, BT = B * T;
    if (m->opts.precision == VKG_PRECISION_BF16) /* the weights the products read this pass */
        VKG_TRY(vkg_op_cast_bf16(c, m->params16, m->params, m->nparams));
    if (m->embed) /* otherwise encoded is the input boundary, written by the caller */
        VKG_TRY(
            vkg_op_encoder_fwd(c, a->s.encoded, m->slots[s].inputs, m->p[WTE], m->p[WPE], B, T, C));
    VKG_TRY(vkg_op_layernorm_fwd(c, m->slots[s].layers[0].s.ln1, m->slots[s].layers[0].s.ln1_mean,
                                 m->slots[s].layers[0].s.ln1_rstd, a->s.encoded,
                                 lp(m, m->p, LN1W, 0), lp(m, m->p, LN1B, 0), BT, C));
    for (int l = 0; l < L; l++) {
        vkg_tensor residual = l == 0 ? a->s.encoded : m->slots[s].layers[l - 1].s.residual3;
        vkg_tensor ln1 = m->slots[s].layers[l].s.ln1, qkv = m->slots[s].layers[l].s.qkv;
        vkg_tensor atty = m->slots[s].layers[l].s.atty, attproj = m->slots[s].layers[l].s.attproj;
        vkg_tensor res2 = m->slots[s].layers[l].s.residual2, ln2 = m->slots[s].layers[l].s.ln2;
        vkg_tensor fch = m->slots[s].layers[l].s.fch, fchg = gelu_out(m, m->slots[s].layers, l);
        vkg_tensor fcproj = m->slots[s].layers[l].s.fcproj;
        vkg_tensor b_qkv = lp(m, m->p, QKVB, l), b_att = lp(m, m->p, ATTPROJB, l);
        vkg_tensor b_fc = lp(m, m->p, FCB, l), b_fcp = lp(m, m->p, FCPROJB, l);
        VKG_TRY(vkg_op_matmul_fwd(c, qkv, ln1, lp(m, m->w, QKVW, l), &b_qkv, BT, C, 3 * C,
                                  m->mm_scratch));
        VKG_TRY(vkg_op_attention_fwd(c, atty, m->slots[s].layers[l].s.lse, qkv, B, T, C, NH));
        VKG_TRY(vkg_op_matmul_fwd(c, attproj, atty, lp(m, m->w, ATTPROJW, l), &b_att, BT, C, C,
                                  m->mm_scratch));
        VKG_TRY(vkg_op_residual_layernorm_fwd(c, res2, ln2, m->slots[s].layers[l].s.ln2_mean,
                                              m->slots[s].layers[l].s.ln2_rstd, residual, attproj,
                                              lp(m, m->p, LN2W, l), lp(m, m->p, LN2B, l), BT, C));
        VKG_TRY(vkg_op_matmul_fwd_gelu(c, fch, fchg, ln2, lp(m, m->w, FCW, l), &b_fc, BT, C, 4 * C,
                                       m->mm_scratch));
        VKG_TRY(vkg_op_matmul_fwd(c, fcproj, fchg, lp(m, m->w, FCPROJW, l), &b_fcp, BT, 4 * C, C,
                                  m->mm_scratch));
        VKG_TRY(record_residual_out(m, s, c, l, res2, fcproj));
    }
    if (!m->head) /* the output boundary is the last layer's residual3 */
        return VKG_OK;
    return vkg_op_matmul_fwd(c, a->s.logits, a->s.lnf, m->w[WTE], NULL, BT, C, Vp, m->mm_scratch);
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

/* Layer l's product backward for weight tensor w: the input gradient, and unless the input pass
 * keeps the output gradient for the weight pass (kept), the weight and bias gradients in the same
 * call, as vkg_op_matmul_bwd gives them. */
static vkg_status product_bwd(vkg_model *m, vkg_cmd *c, const vkg_tensor *kept, vkg_tensor dinp,
                              int w, const vkg_tensor *dbias, vkg_tensor dout, vkg_tensor inp,
                              int l, int N, int Cin, int OC)
{
    if (kept)
        return vkg_op_matmul_bwd_dinp(c, dinp, dout, lp(m, m->w, w, l), N, Cin, OC);
    return vkg_op_matmul_bwd(c, dinp, lp(m, m->g, w, l), dbias, dout, inp, lp(m, m->w, w, l), N,
                             Cin, OC, &m->mm_scratch);
}

/* The backward pass of slot s. cut (may be NULL) is called after each gradient unit is complete
 * (see vkg_model_unit_ranges; the last unit ends with the list) and may end the current list and
 * continue in another (*pc). With cut, the classifier's weight gradient comes before its input
 * gradient, so that wte's unit closes as early as possible, and (whole model) the encoder's
 * contribution to wte is not recorded: the caller sums the rows of dencoded per token itself. */
enum { PASS_ALL, PASS_INPUT }; /* the whole backward, or its input pass (split_w) */

static vkg_status record_backward_cut(vkg_model *m, int s, int pass, vkg_cmd **pc,
                                      vkg__model_cut_fn cut, void *ctx)
{
    const vkg_model_slot *sl = &m->slots[s];
    const vkg_model_acts *a = &sl->acts;
    const vkg_model_grad_acts *d = &m->gacts;
    int B = m->opts.B, T = m->opts.T, C = m->cfg.channels, NH = m->cfg.num_heads;
    int L = m->nl, Vp = m->cfg.padded_vocab_size, BT = B * T, u = 0;
    size_t btc = (size_t)BT * C;
    VKG_TRY(zero_top_grads(m, *pc));
    if (m->head) { /* logits now hold dlogits (written by the loss) */
        if (pass == PASS_INPUT) {
            VKG_TRY(vkg_op_matmul_bwd_dinp(*pc, d->s.dlnf, a->s.logits, m->w[WTE], BT, C, Vp));
            u++;
        } else if (cut) {
            VKG_TRY(vkg_op_matmul_bwd_dweight(*pc, m->g[WTE], NULL, a->s.logits, a->s.lnf, BT, C,
                                              Vp, &m->mm_scratch));
            VKG_TRY(unit_done(cut, ctx, pc, &u));
            VKG_TRY(vkg_op_matmul_bwd_dinp(*pc, d->s.dlnf, a->s.logits, m->w[WTE], BT, C, Vp));
        } else {
            VKG_TRY(vkg_op_matmul_bwd(*pc, d->s.dlnf, m->g[WTE], NULL, a->s.logits, a->s.lnf,
                                      m->w[WTE], BT, C, Vp, &m->mm_scratch));
            u++;
        }
        VKG_TRY(vkg_op_layernorm_bwd(*pc, dstream(m, L - 1), m->g[LNFW], m->g[LNFB], d->s.dlnf,
                                     m->slots[s].layers[L - 1].s.residual3, m->p[LNFW],
                                     a->s.lnf_mean, a->s.lnf_rstd, BT, C));
        VKG_TRY(unit_done(cut, ctx, pc, &u));
    }
    for (int l = L - 1; l >= 0; l--) {
        vkg_cmd *c = *pc;
        vkg_tensor residual = l == 0 ? a->s.encoded : m->slots[s].layers[l - 1].s.residual3;
        vkg_tensor dresidual = l == 0 ? d->s.dencoded : dstream(m, l - 1);
        vkg_tensor dres3 = l == L - 1 && !m->head ? m->dtop : dstream(m, l);
        vkg_tensor dres2 = d->s.dresidual2, dfcproj = d->s.dfcproj, dfchg = d->s.dfch_gelu;
        vkg_tensor dfch = d->s.dfch, dln2 = d->s.dln2, dattproj = d->s.dattproj;
        vkg_tensor datty = d->s.datty, dqkv = d->s.dqkv, dln1 = d->s.dln1;
        vkg_tensor fchg = gelu_out(m, m->slots[s].layers, l);
        const vkg_tensor *kept = pass == PASS_INPUT ? &sl->kept[l * VKG_MODEL_NUM_KEPT] : NULL;
        if (kept) /* the products' output gradients, kept for the weight pass */
            dfcproj = kept[0], dfch = kept[1], dattproj = kept[2], dqkv = kept[3];
        VKG_TRY(zero_layer_grads(m, c, l, kept));
        if (!kept && m->opts.recompute & VKG_MODEL_RECOMPUTE_GELU)
            VKG_TRY(vkg_op_gelu_fwd(c, fchg, m->slots[s].layers[l].s.fch, 4 * btc));
        vkg_tensor gb_fcp = lp(m, m->g, FCPROJB, l), gb_fc = lp(m, m->g, FCB, l);
        vkg_tensor gb_att = lp(m, m->g, ATTPROJB, l), gb_qkv = lp(m, m->g, QKVB, l);
        VKG_TRY(vkg_op_residual_bwd(c, dres2, dfcproj, dres3, btc));
        VKG_TRY(product_bwd(m, c, kept, dfchg, FCPROJW, &gb_fcp, dfcproj, fchg, l, BT, 4 * C, C));
        VKG_TRY(vkg_op_gelu_bwd(c, dfch, m->slots[s].layers[l].s.fch, dfchg, 4 * btc));
        VKG_TRY(product_bwd(m, c, kept, dln2, FCW, &gb_fc, dfch, m->slots[s].layers[l].s.ln2, l, BT,
                            C, 4 * C));
        VKG_TRY(vkg_op_layernorm_bwd(c, dres2, lp(m, m->g, LN2W, l), lp(m, m->g, LN2B, l), dln2,
                                     m->slots[s].layers[l].s.residual2, lp(m, m->p, LN2W, l),
                                     m->slots[s].layers[l].s.ln2_mean,
                                     m->slots[s].layers[l].s.ln2_rstd, BT, C));
        VKG_TRY(vkg_op_residual_bwd(c, dresidual, dattproj, dres2, btc));
        VKG_TRY(product_bwd(m, c, kept, datty, ATTPROJW, &gb_att, dattproj,
                            m->slots[s].layers[l].s.atty, l, BT, C, C));
        VKG_TRY(vkg_op_attention_bwd(c, dqkv, datty, m->slots[s].layers[l].s.qkv,
                                     m->slots[s].layers[l].s.atty, m->slots[s].layers[l].s.lse, B,
                                     T, C, NH, m->delta));
        VKG_TRY(product_bwd(m, c, kept, dln1, QKVW, &gb_qkv, dqkv, m->slots[s].layers[l].s.ln1, l,
                            BT, C, 3 * C));
        VKG_TRY(vkg_op_layernorm_bwd(c, dresidual, lp(m, m->g, LN1W, l), lp(m, m->g, LN1B, l), dln1,
                                     residual, lp(m, m->p, LN1W, l),
                                     m->slots[s].layers[l].s.ln1_mean,
                                     m->slots[s].layers[l].s.ln1_rstd, BT, C));
        if (l > 0 || m->embed)
            VKG_TRY(unit_done(cut, ctx, pc, &u));
    }
    if (!m->embed) /* dencoded holds the gradient of the input boundary */
        return VKG_OK;
    if (cut && m->head) /* the whole model's split: the caller adds wte's rows */
        return vkg_op_encoder_bwd_wpe(*pc, m->g[WPE], d->s.dencoded, B, T, C);
    return vkg_op_encoder_bwd(*pc, m->g[WTE], m->g[WPE], d->s.dencoded, sl->inputs, B, T, C);
}

/* The weight pass of slot s (split_w): the products' weight and bias gradients from the output
 * gradients its input pass kept, with the arguments vkg_op_matmul_bwd gives them in the whole
 * backward, so that each adds the same values. */
static vkg_status record_backward_weight(vkg_model *m, int s, vkg_cmd *c)
{
    const vkg_model_slot *sl = &m->slots[s];
    const vkg_model_acts *a = &sl->acts;
    int C = m->cfg.channels, Vp = m->cfg.padded_vocab_size, BT = m->opts.B * m->opts.T;
    if (m->head)
        VKG_TRY(vkg_op_matmul_bwd_dweight(c, m->g[WTE], NULL, a->s.logits, a->s.lnf, BT, C, Vp,
                                          &m->mm_scratch));
    for (int l = m->nl - 1; l >= 0; l--) {
        const vkg_model_acts *la = &sl->layers[l];
        const vkg_tensor *kept = &sl->kept[l * VKG_MODEL_NUM_KEPT];
        vkg_tensor fchg = gelu_out(m, sl->layers, l);
        vkg_tensor gb_fcp = lp(m, m->g, FCPROJB, l), gb_fc = lp(m, m->g, FCB, l);
        vkg_tensor gb_att = lp(m, m->g, ATTPROJB, l), gb_qkv = lp(m, m->g, QKVB, l);
        if (m->opts.recompute & VKG_MODEL_RECOMPUTE_GELU)
            VKG_TRY(vkg_op_gelu_fwd(c, fchg, la->s.fch, (size_t)BT * 4 * (size_t)C));
        VKG_TRY(vkg_op_matmul_bwd_dweight(c, lp(m, m->g, FCPROJW, l), &gb_fcp, kept[0], fchg, BT,
                                          4 * C, C, &m->mm_scratch));
        VKG_TRY(vkg_op_matmul_bwd_dweight(c, lp(m, m->g, FCW, l), &gb_fc, kept[1], la->s.ln2, BT, C,
                                          4 * C, &m->mm_scratch));
        VKG_TRY(vkg_op_matmul_bwd_dweight(c, lp(m, m->g, ATTPROJW, l), &gb_att, kept[2], la->s.atty,
                                          BT, C, C, &m->mm_scratch));
        VKG_TRY(vkg_op_matmul_bwd_dweight(c, lp(m, m->g, QKVW, l), &gb_qkv, kept[3], la->s.ln1, BT,
                                          C, 3 * C, &m->mm_scratch));
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
