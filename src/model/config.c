/* The GPT-2 parameter table: sizes, names and weight-decay flags of llm.c's 16 tensors.
 * No allocation, no Vulkan. */
#include "vkgpt/model.h"

#include "base/error.h"

static const char *const param_names[VKG_GPT2_NUM_PARAM_TENSORS] = {
    "wte",  "wpe",  "ln1w", "ln1b", "qkvw",    "qkvb",    "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw",  "fcb",  "fcprojw", "fcprojb", "lnfw",     "lnfb",
};

int vkg_gpt2_pad_vocab(int vocab_size)
{
    return (vocab_size + 127) / 128 * 128;
}

vkg_status vkg_gpt2_config_validate(const vkg_gpt2_config *cfg)
{
    VKG_CHECK(cfg->max_seq_len > 0, VKG_ERR_INVALID_ARG, "max_seq_len must be > 0, got %d",
              cfg->max_seq_len);
    VKG_CHECK(cfg->vocab_size > 0, VKG_ERR_INVALID_ARG, "vocab_size must be > 0, got %d",
              cfg->vocab_size);
    VKG_CHECK(cfg->padded_vocab_size >= cfg->vocab_size, VKG_ERR_INVALID_ARG,
              "padded_vocab_size (%d) must be >= vocab_size (%d)", cfg->padded_vocab_size,
              cfg->vocab_size);
    VKG_CHECK(cfg->num_layers > 0, VKG_ERR_INVALID_ARG, "num_layers must be > 0, got %d",
              cfg->num_layers);
    VKG_CHECK(cfg->num_heads > 0, VKG_ERR_INVALID_ARG, "num_heads must be > 0, got %d",
              cfg->num_heads);
    VKG_CHECK(cfg->channels > 0 && cfg->channels % cfg->num_heads == 0, VKG_ERR_INVALID_ARG,
              "channels (%d) must be > 0 and divisible by num_heads (%d)", cfg->channels,
              cfg->num_heads);
    return VKG_OK;
}

void vkg_gpt2_param_sizes(const vkg_gpt2_config *cfg, size_t sizes[VKG_GPT2_NUM_PARAM_TENSORS])
{
    size_t Vp = (size_t)cfg->padded_vocab_size, C = (size_t)cfg->channels;
    size_t maxT = (size_t)cfg->max_seq_len, L = (size_t)cfg->num_layers;
    sizes[0] = Vp * C;         /* wte */
    sizes[1] = maxT * C;       /* wpe */
    sizes[2] = L * C;          /* ln1w */
    sizes[3] = L * C;          /* ln1b */
    sizes[4] = L * 3 * C * C;  /* qkvw */
    sizes[5] = L * 3 * C;      /* qkvb */
    sizes[6] = L * C * C;      /* attprojw */
    sizes[7] = L * C;          /* attprojb */
    sizes[8] = L * C;          /* ln2w */
    sizes[9] = L * C;          /* ln2b */
    sizes[10] = L * 4 * C * C; /* fcw */
    sizes[11] = L * 4 * C;     /* fcb */
    sizes[12] = L * C * 4 * C; /* fcprojw */
    sizes[13] = L * C;         /* fcprojb */
    sizes[14] = C;             /* lnfw */
    sizes[15] = C;             /* lnfb */
}

size_t vkg_gpt2_num_params(const vkg_gpt2_config *cfg)
{
    size_t sizes[VKG_GPT2_NUM_PARAM_TENSORS], total = 0;
    vkg_gpt2_param_sizes(cfg, sizes);
    for (int i = 0; i < VKG_GPT2_NUM_PARAM_TENSORS; i++)
        total += sizes[i];
    return total;
}

const char *vkg_gpt2_param_name(int i)
{
    return i >= 0 && i < VKG_GPT2_NUM_PARAM_TENSORS ? param_names[i] : "?";
}

int vkg_gpt2_param_decays(int i)
{
    return i == 0 || i == 1 || i == 4 || i == 6 || i == 10 || i == 12;
}
