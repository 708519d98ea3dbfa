/* Hugging Face's config.json (src/io/hfconfig.c): the published files of GPT-2, SmolLM2-135M,
 * Qwen2.5-0.5B, Qwen3-0.6B, TinyLlama-1.1B and Llama 3.2 1B (their computing fields as published,
 * with fields vkgpt skips) read into the configurations of the presets (whose parameter counts
 * test_params checks against the published ones); every preset written and read back to the
 * same configuration; and the refusals, each naming the file and the field: an unknown
 * model_type, a missing size, another activation, a rope scaling other than Llama 3's,
 * sliding-window attention, attention_bias, malformed JSON, a string for a number, a file over
 * 1 MiB. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"
#include "vkgpt/io.h"

static char tmp_root[400];

/* got must be want with a message holding both needles. */
static void expect_refused(vkg_status got, vkg_status want, const char *n1, const char *n2)
{
    const char *msg = vkg_error_message();
    if (got != want || !strstr(msg, n1) || !strstr(msg, n2))
        fail_msg("expected %s naming '%s' and '%s', got %s: %s", vkg_status_name(want), n1, n2,
                 vkg_status_name(got), msg);
}

static int setup(void **state)
{
    (void)state;
    return vkg_test_tmp_make(tmp_root, sizeof tmp_root, "vkg_test_hfconfig");
}

static int teardown(void **state)
{
    (void)state;
    return vkg_test_tmp_remove(tmp_root);
}

static const char gpt2_json[] =
    "{\"activation_function\": \"gelu_new\", \"architectures\": [\"GPT2LMHeadModel\"],"
    " \"attn_pdrop\": 0.1, \"bos_token_id\": 50256, \"embd_pdrop\": 0.1, \"eos_token_id\": 50256,"
    " \"initializer_range\": 0.02, \"layer_norm_epsilon\": 1e-05, \"model_type\": \"gpt2\","
    " \"n_ctx\": 1024, \"n_embd\": 768, \"n_head\": 12, \"n_layer\": 12, \"n_positions\": 1024,"
    " \"resid_pdrop\": 0.1, \"summary_activation\": null, \"summary_first_dropout\": 0.1,"
    " \"task_specific_params\": {\"text-generation\": {\"do_sample\": true, \"max_length\": 50}},"
    " \"vocab_size\": 50257}";

static const char smollm2_json[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false,"
    " \"attention_dropout\": 0.0, \"bos_token_id\": 0, \"eos_token_id\": 0, \"head_dim\": 64,"
    " \"hidden_act\": \"silu\", \"hidden_size\": 576, \"initializer_range\": 0.041666666666666664,"
    " \"intermediate_size\": 1536, \"is_llama_config\": true, \"max_position_embeddings\": 8192,"
    " \"mlp_bias\": false, \"model_type\": \"llama\", \"num_attention_heads\": 9,"
    " \"num_hidden_layers\": 30, \"num_key_value_heads\": 3, \"pretraining_tp\": 1,"
    " \"rms_norm_eps\": 1e-05, \"rope_interleaved\": false, \"rope_scaling\": null,"
    " \"rope_theta\": 100000, \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\","
    " \"transformers_version\": \"4.40.1\", \"use_cache\": true, \"vocab_size\": 49152}";

static const char qwen25_json[] =
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0,"
    " \"bos_token_id\": 151643, \"eos_token_id\": 151643, \"hidden_act\": \"silu\","
    " \"hidden_size\": 896, \"initializer_range\": 0.02, \"intermediate_size\": 4864,"
    " \"max_position_embeddings\": 32768, \"max_window_layers\": 24, \"model_type\": \"qwen2\","
    " \"num_attention_heads\": 14, \"num_hidden_layers\": 24, \"num_key_value_heads\": 2,"
    " \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"sliding_window\": 32768,"
    " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\","
    " \"transformers_version\": \"4.40.1\", \"use_cache\": true, \"use_mrope\": false,"
    " \"use_sliding_window\": false, \"vocab_size\": 151936}";

static const char qwen3_json[] =
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"attention_bias\": false,"
    " \"attention_dropout\": 0.0, \"bos_token_id\": 151643, \"eos_token_id\": 151645,"
    " \"head_dim\": 128, \"hidden_act\": \"silu\", \"hidden_size\": 1024,"
    " \"initializer_range\": 0.02, \"intermediate_size\": 3072, \"max_position_embeddings\": 40960,"
    " \"max_window_layers\": 28, \"model_type\": \"qwen3\", \"num_attention_heads\": 16,"
    " \"num_hidden_layers\": 28, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-06,"
    " \"rope_scaling\": null, \"rope_theta\": 1000000, \"sliding_window\": null,"
    " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\","
    " \"transformers_version\": \"4.51.0\", \"use_cache\": true, \"use_sliding_window\": false,"
    " \"vocab_size\": 151936}";

static const char tinyllama_json[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"bos_token_id\": 1, \"eos_token_id\": 2,"
    " \"hidden_act\": \"silu\", \"hidden_size\": 2048, \"initializer_range\": 0.02,"
    " \"intermediate_size\": 5632, \"max_position_embeddings\": 2048, \"model_type\": \"llama\","
    " \"num_attention_heads\": 32, \"num_hidden_layers\": 22, \"num_key_value_heads\": 4,"
    " \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05, \"rope_scaling\": null,"
    " \"tie_word_embeddings\": false, \"torch_dtype\": \"float32\","
    " \"transformers_version\": \"4.31.0.dev0\", \"use_cache\": true, \"vocab_size\": 32000}";

/* meta-llama/Llama-3.2-1B: Llama 3's rope scaling */
static const char llama32_json[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false,"
    " \"attention_dropout\": 0.0, \"bos_token_id\": 128000, \"eos_token_id\": 128001,"
    " \"head_dim\": 64, \"hidden_act\": \"silu\", \"hidden_size\": 2048,"
    " \"initializer_range\": 0.02, \"intermediate_size\": 8192, \"max_position_embeddings\": "
    "131072,"
    " \"mlp_bias\": false, \"model_type\": \"llama\", \"num_attention_heads\": 32,"
    " \"num_hidden_layers\": 16, \"num_key_value_heads\": 8, \"pretraining_tp\": 1,"
    " \"rms_norm_eps\": 1e-05, \"rope_scaling\": {\"factor\": 32.0, \"high_freq_factor\": 4.0,"
    " \"low_freq_factor\": 1.0, \"original_max_position_embeddings\": 8192,"
    " \"rope_type\": \"llama3\"}, \"rope_theta\": 500000.0, \"tie_word_embeddings\": true,"
    " \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.45.0.dev0\","
    " \"use_cache\": true, \"vocab_size\": 128256}";

static void expect_config(const char *json, const char *preset)
{
    vkg_model_config got, want;
    assert_int_equal(vkg_hf_config_parse(json, strlen(json), preset, &got), VKG_OK);
    assert_int_equal(vkg_model_preset(preset, &want), VKG_OK);
    /* every field: ints and floats of 4 bytes, no padding */
    if (memcmp(&got, &want, sizeof got))
        fail_msg("%s: config.json does not give the preset's configuration", preset);
}

static void test_published_configs(void **state)
{
    (void)state;
    expect_config(gpt2_json, "gpt2-124m");
    expect_config(smollm2_json, "smollm2-135m");
    expect_config(qwen25_json, "qwen2.5-0.5b");
    expect_config(qwen3_json, "qwen3-0.6b");
    expect_config(tinyllama_json, "tinyllama-1.1b");
    vkg_model_config c;
    assert_int_equal(vkg_hf_config_parse(llama32_json, strlen(llama32_json), "l32", &c), VKG_OK);
    assert_true(c.rope_factor == 32.0f && c.rope_low_freq_factor == 1.0f &&
                c.rope_high_freq_factor == 4.0f && c.rope_original_max == 8192);
    assert_true(c.rope_theta == 500000.0f && vkg_model_head_dim(&c) == 64 && c.num_kv_heads == 8);
    assert_int_equal(c.untied, 0);
    assert_int_equal(vkg_model_num_params(&c), 1235814400); /* Llama 3.2 1B, published */
}

static void test_presets_round_trip(void **state)
{
    (void)state;
    const char *const *names = vkg_model_preset_names();
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", tmp_root);
    for (int i = 0; names[i]; i++) {
        vkg_model_config want, got;
        assert_int_equal(vkg_model_preset(names[i], &want), VKG_OK);
        assert_int_equal(vkg_hf_config_write(path, &want), VKG_OK);
        assert_int_equal(vkg_hf_config_read(path, &got), VKG_OK);
        if (memcmp(&got, &want, sizeof got))
            fail_msg("%s: written and read back, the configuration changed", names[i]);
    }
    vkg_model_config relu2 = {.max_seq_len = 16,
                              .vocab_size = 128,
                              .padded_vocab_size = 128,
                              .num_layers = 2,
                              .num_heads = 2,
                              .channels = 16,
                              .mlp = VKG_MLP_RELU2,
                              .norm = VKG_NORM_RMS,
                              .pos = VKG_POS_ROPE,
                              .bias = VKG_BIAS_NONE};
    expect_refused(vkg_hf_config_write(path, &relu2), VKG_ERR_INVALID_ARG, path,
                   "none of the families");
}

/* Each refusal names the file and what was wrong; *cfg stays as it was. */
static void refused(const char *json, const char *needle)
{
    vkg_model_config c, before;
    memset(&c, 0x5a, sizeof c);
    before = c;
    expect_refused(vkg_hf_config_parse(json, strlen(json), "cfg.json", &c), VKG_ERR_FORMAT,
                   "cfg.json", needle);
    assert_memory_equal(&c, &before, sizeof c);
}

static void test_refusals(void **state)
{
    (void)state;
    refused("{\"model_type\": \"gpt_neox\", \"hidden_size\": 64}", "gpt_neox");
    refused("{\"hidden_size\": 64}", "no \"model_type\"");
    refused("{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"num_attention_heads\": 2,"
            " \"vocab_size\": 100, \"max_position_embeddings\": 64, \"intermediate_size\": 128}",
            "\"hidden_size\" is missing");
    refused("{\"model_type\": \"llama\", \"hidden_act\": \"gelu\", \"hidden_size\": 64,"
            " \"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"vocab_size\": 100,"
            " \"max_position_embeddings\": 64, \"intermediate_size\": 128}",
            "hidden_act \"gelu\"");
    refused("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
            " \"num_attention_heads\": 2, \"vocab_size\": 100, \"max_position_embeddings\": 64,"
            " \"intermediate_size\": 128, \"rope_scaling\": {\"rope_type\": \"yarn\","
            " \"factor\": 4.0}}",
            "\"yarn\"");
    refused("{\"model_type\": \"mistral\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
            " \"num_attention_heads\": 2, \"vocab_size\": 100, \"max_position_embeddings\": 8192,"
            " \"intermediate_size\": 128, \"sliding_window\": 4096}",
            "sliding-window attention");
    refused("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
            " \"num_attention_heads\": 2, \"vocab_size\": 100, \"max_position_embeddings\": 64,"
            " \"intermediate_size\": 128, \"attention_bias\": true}",
            "attention_bias true");
    refused("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
            " \"num_attention_heads\": 3, \"vocab_size\": 100, \"max_position_embeddings\": 64,"
            " \"intermediate_size\": 128}",
            "not a valid model");
    refused("{\"model_type\": \"llama\", \"hidden_size\": \"64\"}", "expected a number");
    refused("{\"model_type\": \"llama\", \"hidden_size\": 64.5}", "whole number");
    refused("{\"model_type\": \"gpt2\", \"n_embd\": 768,", "cfg.json");
    refused("{\"model_type\": \"gpt2\", \"n_embd\": 1e999}", "out of range");
    refused("{\"model_type\": \"llama\", \"rope_theta\": 1e300}", "out of range");
    refused("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
            " \"num_attention_heads\": 2, \"vocab_size\": 100, \"max_position_embeddings\": 64,"
            " \"intermediate_size\": 128, \"rope_scaling\": {\"rope_type\": \"llama3\","
            " \"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0,"
            " \"original_max_position_embeddings\": 8.19222e+23}}",
            "a whole number from 1 to 2^24"); /* a fuzz finding: converted before its check */
    char path[600];
    snprintf(path, sizeof path, "%s/big.json", tmp_root);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (int i = 0; i < (1 << 20) / 8 + 1; i++)
        fputs("        ", f);
    fclose(f);
    vkg_model_config c;
    expect_refused(vkg_hf_config_read(path, &c), VKG_ERR_FORMAT, path, "1048576");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_published_configs),
        cmocka_unit_test(test_presets_round_trip),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
