/* Recording GPT-2's step into command lists, once: forward (llm.c's gpt2_forward), the fused
 * softmax cross-entropy, backward (gpt2_backward, accumulating into the gradients) and the AdamW
 * update. Every op comes from src/ops; barriers come from the command list. */
#include "model/gpt2_internal.h"

/* Layer l's slice of a per-layer activation whose per-layer size is `per` floats. */
static vkg_tensor layer(vkg_tensor t, int l, size_t per)
{
    return vkg_tensor_view(t, (size_t)l * per * 4, per * 4);
}

/* Parameter tensor i's slice for layer l (tensors 2..13 are stacked over L). */
static vkg_tensor lp(const vkg_gpt2 *m, const vkg_tensor *set, int i, int l)
{
    size_t per = m->param_sizes[i] / (size_t)m->cfg.num_layers;
    return layer(set[i], l, per);
}

static vkg_status record_forward(vkg_gpt2 *m, vkg_cmd *c)
{
    const vkg_gpt2_acts *a = &m->acts;
    int B = m->opts.B, T = m->opts.T, C = m->cfg.channels, NH = m->cfg.num_heads;
    int L = m->cfg.num_layers, Vp = m->cfg.padded_vocab_size, BT = B * T;
    size_t btc = (size_t)BT * C, bt = (size_t)BT;
    size_t att = (size_t)B * NH * T * T;
    VKG_TRY(vkg_op_encoder_fwd(c, a->s.encoded, m->inputs, m->p[WTE], m->p[WPE], B, T, C));
    for (int l = 0; l < L; l++) {
        vkg_tensor residual = l == 0 ? a->s.encoded : layer(a->s.residual3, l - 1, btc);
        vkg_tensor ln1 = layer(a->s.ln1, l, btc), qkv = layer(a->s.qkv, l, 3 * btc);
        vkg_tensor atty = layer(a->s.atty, l, btc), attproj = layer(a->s.attproj, l, btc);
        vkg_tensor res2 = layer(a->s.residual2, l, btc), ln2 = layer(a->s.ln2, l, btc);
        vkg_tensor fch = layer(a->s.fch, l, 4 * btc), fchg = layer(a->s.fch_gelu, l, 4 * btc);
        vkg_tensor fcproj = layer(a->s.fcproj, l, btc), res3 = layer(a->s.residual3, l, btc);
        vkg_tensor b_qkv = lp(m, m->p, QKVB, l), b_att = lp(m, m->p, ATTPROJB, l);
        vkg_tensor b_fc = lp(m, m->p, FCB, l), b_fcp = lp(m, m->p, FCPROJB, l);
        VKG_TRY(vkg_op_layernorm_fwd(c, ln1, layer(a->s.ln1_mean, l, bt),
                                     layer(a->s.ln1_rstd, l, bt), residual, lp(m, m->p, LN1W, l),
                                     lp(m, m->p, LN1B, l), BT, C));
        VKG_TRY(vkg_op_matmul_fwd(c, qkv, ln1, lp(m, m->p, QKVW, l), &b_qkv, BT, C, 3 * C,
                                  m->mm_scratch));
        VKG_TRY(vkg_op_attention_fwd(c, atty, layer(a->s.att, l, att), qkv, B, T, C, NH));
        VKG_TRY(vkg_op_matmul_fwd(c, attproj, atty, lp(m, m->p, ATTPROJW, l), &b_att, BT, C, C,
                                  m->mm_scratch));
        VKG_TRY(vkg_op_residual_fwd(c, res2, residual, attproj, btc));
        VKG_TRY(vkg_op_layernorm_fwd(c, ln2, layer(a->s.ln2_mean, l, bt),
                                     layer(a->s.ln2_rstd, l, bt), res2, lp(m, m->p, LN2W, l),
                                     lp(m, m->p, LN2B, l), BT, C));
        VKG_TRY(vkg_op_matmul_fwd(c, fch, ln2, lp(m, m->p, FCW, l), &b_fc, BT, C, 4 * C,
                                  m->mm_scratch));
        VKG_TRY(vkg_op_gelu_fwd(c, fchg, fch, 4 * btc));
        VKG_TRY(vkg_op_matmul_fwd(c, fcproj, fchg, lp(m, m->p, FCPROJW, l), &b_fcp, BT, 4 * C, C,
                                  m->mm_scratch));
        VKG_TRY(vkg_op_residual_fwd(c, res3, res2, fcproj, btc));
    }
    VKG_TRY(vkg_op_layernorm_fwd(c, a->s.lnf, a->s.lnf_mean, a->s.lnf_rstd,
                                 layer(a->s.residual3, L - 1, btc), m->p[LNFW], m->p[LNFB], BT, C));
    return vkg_op_matmul_fwd(c, a->s.logits, a->s.lnf, m->p[WTE], NULL, BT, C, Vp, m->mm_scratch);
}

/* The backward pass. cut (may be NULL) is called after each gradient unit is complete (unit 0:
 * wte's classifier part; 1: the final layernorm; 2..L+1: layers L-1..0; the last unit, wpe, ends
 * with the list) and may end the current list and continue in another (*pc). With cut, the
 * classifier's weight gradient comes before its input gradient, so that wte's bucket closes as
 * early as possible, and the encoder's contribution to wte is not recorded: the caller sums
 * the rows of dencoded per token itself (vkg_gpt2_encoded_grad_read). */
static vkg_status record_backward_cut(vkg_gpt2 *m, vkg_cmd **pc, vkg__gpt2_cut_fn cut, void *ctx)
{
    vkg_cmd *c = *pc;
    const vkg_gpt2_acts *a = &m->acts;
    const vkg_gpt2_grad_acts *d = &m->gacts;
    int B = m->opts.B, T = m->opts.T, C = m->cfg.channels, NH = m->cfg.num_heads;
    int L = m->cfg.num_layers, Vp = m->cfg.padded_vocab_size, BT = B * T;
    size_t btc = (size_t)BT * C, bt = (size_t)BT;
    size_t att = (size_t)B * NH * T * T;
    /* logits now hold dlogits (written by the loss) */
    if (cut) {
        VKG_TRY(vkg_op_matmul_bwd_dweight(c, m->g[WTE], NULL, a->s.logits, a->s.lnf, BT, C, Vp));
        VKG_TRY(cut(ctx, pc, 0));
        c = *pc;
        VKG_TRY(vkg_op_matmul_bwd_dinp(c, d->s.dlnf, a->s.logits, m->p[WTE], BT, C, Vp));
    } else {
        VKG_TRY(vkg_op_matmul_bwd(c, d->s.dlnf, m->g[WTE], NULL, a->s.logits, a->s.lnf, m->p[WTE],
                                  BT, C, Vp));
    }
    VKG_TRY(vkg_op_layernorm_bwd(c, layer(d->s.dresidual3, L - 1, btc), m->g[LNFW], m->g[LNFB],
                                 d->s.dlnf, layer(a->s.residual3, L - 1, btc), m->p[LNFW],
                                 a->s.lnf_mean, a->s.lnf_rstd, BT, C));
    if (cut) {
        VKG_TRY(cut(ctx, pc, 1));
        c = *pc;
    }
    for (int l = L - 1; l >= 0; l--) {
        vkg_tensor residual = l == 0 ? a->s.encoded : layer(a->s.residual3, l - 1, btc);
        vkg_tensor dresidual = l == 0 ? d->s.dencoded : layer(d->s.dresidual3, l - 1, btc);
        vkg_tensor dres3 = layer(d->s.dresidual3, l, btc), dres2 = layer(d->s.dresidual2, l, btc);
        vkg_tensor dfcproj = layer(d->s.dfcproj, l, btc), dfchg = layer(d->s.dfch_gelu, l, 4 * btc);
        vkg_tensor dfch = layer(d->s.dfch, l, 4 * btc), dln2 = layer(d->s.dln2, l, btc);
        vkg_tensor dattproj = layer(d->s.dattproj, l, btc), datty = layer(d->s.datty, l, btc);
        vkg_tensor dqkv = layer(d->s.dqkv, l, 3 * btc), dln1 = layer(d->s.dln1, l, btc);
        vkg_tensor gb_fcp = lp(m, m->g, FCPROJB, l), gb_fc = lp(m, m->g, FCB, l);
        vkg_tensor gb_att = lp(m, m->g, ATTPROJB, l), gb_qkv = lp(m, m->g, QKVB, l);
        VKG_TRY(vkg_op_residual_bwd(c, dres2, dfcproj, dres3, btc));
        VKG_TRY(vkg_op_matmul_bwd(c, dfchg, lp(m, m->g, FCPROJW, l), &gb_fcp, dfcproj,
                                  layer(a->s.fch_gelu, l, 4 * btc), lp(m, m->p, FCPROJW, l), BT,
                                  4 * C, C));
        VKG_TRY(vkg_op_gelu_bwd(c, dfch, layer(a->s.fch, l, 4 * btc), dfchg, 4 * btc));
        VKG_TRY(vkg_op_matmul_bwd(c, dln2, lp(m, m->g, FCW, l), &gb_fc, dfch,
                                  layer(a->s.ln2, l, btc), lp(m, m->p, FCW, l), BT, C, 4 * C));
        VKG_TRY(vkg_op_layernorm_bwd(c, dres2, lp(m, m->g, LN2W, l), lp(m, m->g, LN2B, l), dln2,
                                     layer(a->s.residual2, l, btc), lp(m, m->p, LN2W, l),
                                     layer(a->s.ln2_mean, l, bt), layer(a->s.ln2_rstd, l, bt), BT,
                                     C));
        VKG_TRY(vkg_op_residual_bwd(c, dresidual, dattproj, dres2, btc));
        VKG_TRY(vkg_op_matmul_bwd(c, datty, lp(m, m->g, ATTPROJW, l), &gb_att, dattproj,
                                  layer(a->s.atty, l, btc), lp(m, m->p, ATTPROJW, l), BT, C, C));
        VKG_TRY(vkg_op_attention_bwd(c, dqkv, datty, layer(a->s.qkv, l, 3 * btc),
                                     layer(a->s.att, l, att), B, T, C, NH, m->dpre));
        VKG_TRY(vkg_op_matmul_bwd(c, dln1, lp(m, m->g, QKVW, l), &gb_qkv, dqkv,
                                  layer(a->s.ln1, l, btc), lp(m, m->p, QKVW, l), BT, C, 3 * C));
        VKG_TRY(vkg_op_layernorm_bwd(c, dresidual, lp(m, m->g, LN1W, l), lp(m, m->g, LN1B, l), dln1,
                                     residual, lp(m, m->p, LN1W, l), layer(a->s.ln1_mean, l, bt),
                                     layer(a->s.ln1_rstd, l, bt), BT, C));
        if (cut) {
            VKG_TRY(cut(ctx, pc, L - l + 1));
            c = *pc;
        }
    }
    if (cut)
        return vkg_op_encoder_bwd_wpe(c, m->g[WPE], d->s.dencoded, B, T, C);
    return vkg_op_encoder_bwd(c, m->g[WTE], m->g[WPE], d->s.dencoded, m->inputs, B, T, C);
}

vkg_status vkg__gpt2_record_fwdbwd_cut(vkg_gpt2 *m, vkg_cmd **pc, vkg__gpt2_cut_fn cut, void *ctx)
{
    const vkg_gpt2_acts *a = &m->acts;
    int BT = m->opts.B * m->opts.T, V = m->cfg.vocab_size, Vp = m->cfg.padded_vocab_size;
    float dloss = m->opts.loss_scale / ((float)BT * (float)m->opts.accum_steps);
    VKG_TRY(vkg_op_fill(*pc, m->gacts_start, m->gacts_count, 0.0f));
    VKG_TRY(record_forward(m, *pc));
    VKG_TRY(vkg_op_xent_fwd_bwd(*pc, a->s.losses, &a->s.logits, a->s.logits, m->targets, BT, V, Vp,
                                dloss));
    return record_backward_cut(m, pc, cut, ctx);
}

static vkg_status record_list(vkg_gpt2 *m, int which)
{
    vkg_cmd *c = m->lists[which];
    const vkg_gpt2_acts *a = &m->acts;
    int BT = m->opts.B * m->opts.T, V = m->cfg.vocab_size, Vp = m->cfg.padded_vocab_size;
    VKG_TRY(vkg_cmd_begin(c));
    switch (which) {
    case VKG_GPT2_LIST_ZERO:
        VKG_TRY(vkg_op_fill(c, m->grads, m->nparams, 0.0f));
        break;
    case VKG_GPT2_LIST_FWDBWD:
        VKG_TRY(vkg__gpt2_record_fwdbwd_cut(m, &c, NULL, NULL));
        break;
    case VKG_GPT2_LIST_EVAL:
        VKG_TRY(record_forward(m, c));
        VKG_TRY(
            vkg_op_xent_fwd_bwd(c, a->s.losses, NULL, a->s.logits, m->targets, BT, V, Vp, 1.0f));
        break;
    case VKG_GPT2_LIST_FWD:
        VKG_TRY(record_forward(m, c));
        break;
    case VKG_GPT2_LIST_UPDATE:
        VKG_TRY(vkg_op_sumsq(c, m->sumsq, &m->grads, &m->nparams, 1, m->sumsq_scratch, 0));
        vkg_cmd_group_begin(c);
        for (int i = 0; i < VKG_GPT2_NUM_PARAM_TENSORS; i++) {
            float wd = vkg_gpt2_param_decays(i) ? m->opts.weight_decay : 0.0f;
            VKG_TRY(vkg_op_adamw(c, m->p[i], m->g[i], m->m1[i], m->m2[i], m->param_sizes[i],
                                 m->opts.beta1, m->opts.beta2, m->opts.eps, wd, m->step,
                                 &m->sumsq));
        }
        vkg_cmd_group_end(c);
        break;
    default:
        return VKG_FAIL(VKG_ERR_INVALID_ARG, "no command list %d", which);
    }
    return vkg_cmd_end(c);
}

vkg_status vkg__gpt2_record(vkg_gpt2 *m)
{
    for (int i = 0; i < VKG_GPT2_NUM_LISTS; i++) {
        VKG_TRY(vkg_cmd_create(m->dev, &m->lists[i]));
        VKG_TRY(record_list(m, i));
    }
    /* Moments start at zero (a fresh optimizer). */
    vkg_cmd *c = m->lists[VKG_GPT2_LIST_ZERO];
    VKG_TRY(vkg_cmd_begin(c));
    VKG_TRY(vkg_op_fill(c, m->mom1, m->nparams, 0.0f));
    VKG_TRY(vkg_op_fill(c, m->mom2, m->nparams, 0.0f));
    VKG_TRY(vkg_op_fill(c, m->params, m->nparams, 0.0f));
    VKG_TRY(vkg_op_fill(c, m->grads, m->nparams, 0.0f));
    VKG_TRY(vkg_cmd_end(c));
    VKG_TRY(vkg_cmd_run(c, 0));
    return record_list(m, VKG_GPT2_LIST_ZERO);
}
