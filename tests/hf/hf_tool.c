/* The C side of tests/hf/hfmodel_check.py: vkgpt's Hugging Face directories and its logits, on
 * the first Vulkan device with the validation layer on (any message fails the command).
 *   hf_tool init DIR SEED L NH C T V   write a GPT-2 configuration's initial model into DIR
 *                                      (config.json, model.safetensors in fp32)
 *   hf_tool logits DIR TOKENS OUT      read the model in DIR, run the device model's forward pass
 *                                      on TOKENS (int32, one row of T), write the logits of every
 *                                      position (T x V float32) to OUT
 *   hf_tool copy DIR OUT               read the model in DIR and write it into OUT (fp32)
 * Exit 0 on success; a message and 1 otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "vkgpt/device.h"
#include "vkgpt/io.h"

static int fail(const char *what, vkg_status st)
{
    fprintf(stderr, "hf_tool: %s: %s: %s\n", what, vkg_status_name(st), vkg_error_message());
    return 1;
}

static int logits(const char *dir, const char *tokens_path, const char *out_path)
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
    vkg_device_opts o = {0};
    o.validation = 1;
    vkg_device_t *dev = NULL;
    if ((st = vkg_device_create(&o, &dev)) != VKG_OK)
        return fail("opening the device", st);
    vkg_model_opts mo = vkg_model_opts_default();
    mo.B = 1, mo.T = (int)T;
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
    char first[512] = "";
    int msgs = vkg_device_destroy_report(&dev, first, sizeof first);
    if (msgs) {
        fprintf(stderr, "hf_tool: %d validation message(s); first: %s\n", msgs, first);
        rc = 1;
    }
    free(row), free(params);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 9 && !strcmp(argv[1], "init")) {
        vkg_model_config c = {.num_layers = atoi(argv[4]),
                              .num_heads = atoi(argv[5]),
                              .channels = atoi(argv[6]),
                              .max_seq_len = atoi(argv[7]),
                              .vocab_size = atoi(argv[8])};
        c.padded_vocab_size = vkg_model_pad_vocab(c.vocab_size);
        vkg_status st = vkg_model_config_validate(&c);
        float *p = st == VKG_OK ? malloc(vkg_model_num_params(&c) * sizeof *p) : NULL;
        if (!p)
            return fail("the configuration", st ? st : VKG_ERR_NOMEM);
        vkg_model_init_params(&c, p, strtoull(argv[3], NULL, 10));
        st = vkg_hf_model_write(argv[2], &c, p, 0);
        free(p);
        return st == VKG_OK ? 0 : fail("writing", st);
    }
    if (argc == 5 && !strcmp(argv[1], "logits"))
        return logits(argv[2], argv[3], argv[4]);
    if (argc == 4 && !strcmp(argv[1], "copy")) {
        vkg_model_config c;
        float *p = NULL;
        vkg_status st = vkg_hf_model_read(argv[2], &c, &p);
        if (st == VKG_OK)
            st = vkg_hf_model_write(argv[3], &c, p, 0);
        free(p);
        return st == VKG_OK ? 0 : fail("copying", st);
    }
    fprintf(stderr, "usage: hf_tool init DIR SEED L NH C T V | logits DIR TOKENS OUT | copy DIR "
                    "OUT\n");
    return 2;
}
