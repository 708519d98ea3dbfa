/* The C side of tests/hf/hfmodel_check.py: vkgpt's Hugging Face directories and its logits, on
 * the first Vulkan device with the validation layer on (any message fails the command).
 *   hf_tool init DIR SEED L NH C T V   write a GPT-2 configuration's initial model into DIR
 *                                      (config.json, model.safetensors in fp32)
 *   hf_tool logits DIR TOKENS OUT [bf16]
 *                                      read the model in DIR, run the device model's forward pass
 *                                      on TOKENS (int32, one row of T), write the logits of every
 *                                      position (T x V float32) to OUT; bf16: in bf16 precision
 *   hf_tool copy DIR OUT               read the model in DIR and write it into OUT (fp32)
 *   hf_tool initcfg DIR SEED CONFIG    write the initial model of CONFIG (a config.json) into DIR
 *   hf_tool train DIR TOKENS B T STEPS LR WD OUT
 *                                      read the model in DIR and train it STEPS AdamW steps
 *                                      (beta1 0.9, beta2 0.95, eps 1e-8, weight decay WD on the
 *                                      matrices, no clipping) on the device model: step s reads
 *                                      B rows of T + 1 tokens (inputs the first T, targets the
 *                                      last T) from TOKENS at row s B; prints each step's loss and
 *                                      writes the trained model into OUT (fp32)
 * Exit 0 on success; a message and 1 otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "optim/adamw.h"
#include "vkgpt/device.h"
#include "vkgpt/io.h"

static int fail(const char *what, vkg_status st)
{
    fprintf(stderr, "hf_tool: %s: %s: %s\n", what, vkg_status_name(st), vkg_error_message());
    return 1;
}

/* Open the device with the validation layer; close it, failing on any message. */
static vkg_status open_device(vkg_device_t **dev)
{
    vkg_device_opts o = {0};
    o.validation = 1;
    return vkg_device_create(&o, dev);
}

static int close_device(vkg_device_t **dev, int rc)
{
    char first[512] = "";
    int msgs = vkg_device_destroy_report(dev, first, sizeof first);
    if (msgs) {
        fprintf(stderr, "hf_tool: %d validation message(s); first: %s\n", msgs, first);
        rc = 1;
    }
    return rc;
}

static int logits(const char *dir, const char *tokens_path, const char *out_path, int precision)
{
    vkg_model_config cfg;
    float *params = NULL;
    vkg_status st = vkg_hf_model_read(dir, &cfg, &params);
    if (st != VKG_OK)
        return fail("reading the model", st);
    FILE *f = fopen(tokens_path, "rb");
    int32_t tok[4096];
    size_t T = f ? fread(tok, sizeof *tok, 4096, f) : 0;
    if (f)
        fclose(f);
    if (!T || (int)T > cfg.max_seq_len) {
        fprintf(stderr, "hf_tool: %s: no tokens, or more than the context\n", tokens_path);
        free(params);
        return 1;
    }
    vkg_device_t *dev = NULL;
    if ((st = open_device(&dev)) != VKG_OK)
        return fail("opening the device", st);
    vkg_model_opts mo = vkg_model_opts_default();
    mo.B = 1, mo.T = (int)T, mo.precision = precision;
    vkg_model *m = NULL;
    int rc = 1;
    float *row = malloc((size_t)cfg.padded_vocab_size * sizeof *row);
    FILE *out = NULL;
    if ((st = vkg_model_create(dev, &cfg, &mo, &m)) != VKG_OK ||
        (st = vkg_model_set_params(m, params)) != VKG_OK ||
        (st = vkg_model_forward(m, tok, NULL, NULL)) != VKG_OK) {
        rc = fail("the forward pass", st);
        goto done;
    }
    if (!row || !(out = fopen(out_path, "wb"))) {
        fprintf(stderr, "hf_tool: cannot write %s\n", out_path);
        goto done;
    }
    for (size_t t = 0; t < T; t++) {
        if ((st = vkg_model_logits_row(m, 0, (int)t, row)) != VKG_OK) {
            rc = fail("reading the logits", st);
            goto done;
        }
        fwrite(row, sizeof *row, (size_t)cfg.vocab_size, out);
    }
    rc = 0;
done:
    if (out && fclose(out) != 0)
        rc = 1;
    vkg_model_destroy(&m);
    rc = close_device(&dev, rc);
    free(row), free(params);
    return rc;
}

/* STEPS AdamW steps of the model in dir on the device (see the header). */
static int train(char **argv)
{
    const char *dir = argv[2], *tokens_path = argv[3], *out_dir = argv[9];
    int B = atoi(argv[4]), T = atoi(argv[5]), steps = atoi(argv[6]);
    float lr = strtof(argv[7], NULL), wd = strtof(argv[8], NULL);
    vkg_model_config cfg;
    float *params = NULL;
    vkg_status st = vkg_hf_model_read(dir, &cfg, &params);
    if (st != VKG_OK)
        return fail("reading the model", st);
    size_t row = (size_t)T + 1, need = (size_t)steps * (size_t)B * row;
    int32_t *tok = malloc(need * sizeof *tok), *in = malloc((size_t)B * T * sizeof *in);
    int32_t *tg = malloc((size_t)B * T * sizeof *tg);
    FILE *f = fopen(tokens_path, "rb");
    size_t got = f && tok ? fread(tok, sizeof *tok, need, f) : 0;
    if (f)
        fclose(f);
    vkg_device_t *dev = NULL;
    vkg_model *m = NULL;
    vkg_adamw *opt = NULL;
    int rc = 1;
    if (got != need || !in || !tg) {
        fprintf(stderr, "hf_tool: %s: %zu tokens, need %zu\n", tokens_path, got, need);
        goto done;
    }
    if ((st = open_device(&dev)) != VKG_OK) {
        rc = fail("opening the device", st);
        goto done;
    }
    vkg_model_opts mo = vkg_model_opts_default();
    mo.B = B, mo.T = T;
    vkg_param_table t;
    vkg_model_params(&cfg, &t);
    vkg_adamw_segment seg[VKG_MAX_PARAM_TENSORS];
    for (int i = 0; i < t.n; i++)
        seg[i] = (vkg_adamw_segment){t.t[i].offset, t.t[i].count, t.t[i].decays};
    vkg_adamw_config ac = vkg_adamw_config_default();
    ac.weight_decay = wd;
    if ((st = vkg_model_create(dev, &cfg, &mo, &m)) != VKG_OK ||
        (st = vkg_model_set_params(m, params)) != VKG_OK ||
        (st = vkg_adamw_create(dev, &ac, vkg_model_params_tensor(m), vkg_model_grads_tensor(m),
                               t.total, seg, t.n, &opt)) != VKG_OK) {
        rc = fail("creating the model", st);
        goto done;
    }
    for (int s = 0; s < steps; s++) {
        for (int b = 0; b < B; b++)
            for (int i = 0; i < T; i++) {
                const int32_t *r = tok + ((size_t)s * B + (size_t)b) * row;
                in[b * T + i] = r[i], tg[b * T + i] = r[i + 1];
            }
        float loss = 0.0f, sumsq = 0.0f;
        if ((st = vkg_model_zero_grad(m)) != VKG_OK ||
            (st = vkg_model_forward_backward(m, in, tg, &loss)) != VKG_OK ||
            (st = vkg_adamw_grad_sumsq(opt, &sumsq)) != VKG_OK ||
            (st = vkg_adamw_update(opt, lr, (uint32_t)s + 1, 0.0f, sumsq, 1.0f)) != VKG_OK) {
            rc = fail("a training step", st);
            goto done;
        }
        printf("step %d loss %.9g\n", s + 1, (double)loss);
    }
    if ((st = vkg_model_get_params(m, params)) != VKG_OK ||
        (st = vkg_hf_model_write(out_dir, &cfg, params, 0)) != VKG_OK) {
        rc = fail("writing the trained model", st);
        goto done;
    }
    rc = 0;
done:
    vkg_adamw_destroy(&opt);
    vkg_model_destroy(&m);
    if (dev)
        rc = close_device(&dev, rc);
    free(tok), free(in), free(tg), free(params);
    return rc;
}

/* Write the initial model of c (st: how reading or checking c went) into dir. */
static int write_initial(vkg_status st, const vkg_model_config *c, const char *dir,
                         const char *seed)
{
    float *p = st == VKG_OK ? malloc(vkg_model_num_params(c) * sizeof *p) : NULL;
    if (!p)
        return fail("the configuration", st ? st : VKG_ERR_NOMEM);
    vkg_model_init_params(c, p, strtoull(seed, NULL, 10));
    st = vkg_hf_model_write(dir, c, p, 0);
    free(p);
    return st == VKG_OK ? 0 : fail("writing", st);
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "initcfg")) {
        vkg_model_config c;
        vkg_status st = vkg_hf_config_read(argv[4], &c);
        return write_initial(st, &c, argv[2], argv[3]);
    }
    if (argc == 10 && !strcmp(argv[1], "train"))
        return train(argv);
    if (argc == 9 && !strcmp(argv[1], "init")) {
        vkg_model_config c = {.num_layers = atoi(argv[4]),
                              .num_heads = atoi(argv[5]),
                              .channels = atoi(argv[6]),
                              .max_seq_len = atoi(argv[7]),
                              .vocab_size = atoi(argv[8])};
        c.padded_vocab_size = vkg_model_pad_vocab(c.vocab_size);
        return write_initial(vkg_model_config_validate(&c), &c, argv[2], argv[3]);
    }
    if ((argc == 5 || (argc == 6 && !strcmp(argv[5], "bf16"))) && !strcmp(argv[1], "logits"))
        return logits(argv[2], argv[3], argv[4], argc == 6 ? VKG_PRECISION_BF16 : 0);
    if (argc == 4 && !strcmp(argv[1], "copy")) {
        vkg_model_config c;
        float *p = NULL;
        vkg_status st = vkg_hf_model_read(argv[2], &c, &p);
        if (st == VKG_OK)
            st = vkg_hf_model_write(argv[3], &c, p, 0);
        free(p);
        return st == VKG_OK ? 0 : fail("copying", st);
    }
    fprintf(stderr,
            "usage: hf_tool init DIR SEED L NH C T V | initcfg DIR SEED CONFIG | logits DIR "
            "TOKENS OUT [bf16] | copy DIR OUT | train DIR TOKENS B T STEPS LR WD OUT\n");
    return 2;
}
