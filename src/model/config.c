/* The GPT-2 parameter table: sizes, names and weight-decay flags of llm.c's 16 tensors.
 * No allocation, no Vulkan. */
#include "vkgpt/model.h"

#include <string.h>

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

vkg_gpt2_part vkg_gpt2_whole(const vkg_gpt2_config *cfg)
{
    return (vkg_gpt2_part){
        .first = 0, .last = cfg->num_layers, .flags = VKG_GPT2_PART_EMBED | VKG_GPT2_PART_HEAD};
}

vkg_status vkg_gpt2_part_validate(const vkg_gpt2_config *cfg, const vkg_gpt2_part *p)
{
    int L = cfg->num_layers;
    VKG_CHECK(p->first >= 0 && p->first < p->last && p->last <= L, VKG_ERR_INVALID_ARG,
              "model part: layers [%d, %d) must be a non-empty range inside [0, %d)", p->first,
              p->last, L);
    VKG_CHECK(!(p->flags & ~(VKG_GPT2_PART_EMBED | VKG_GPT2_PART_HEAD)), VKG_ERR_INVALID_ARG,
              "model part: unknown flags 0x%x", (unsigned)p->flags);
    VKG_CHECK(!!(p->flags & VKG_GPT2_PART_EMBED) == (p->first == 0), VKG_ERR_INVALID_ARG,
              "model part: the embeddings belong to the part that starts at layer 0 (this one "
              "starts at %d)",
              p->first);
    VKG_CHECK(!!(p->flags & VKG_GPT2_PART_HEAD) == (p->last == L), VKG_ERR_INVALID_ARG,
              "model part: the head belongs to the part that ends at layer %d (this one ends at "
              "%d)",
              L, p->last);
    return VKG_OK;
}

void vkg_gpt2_part_layout(const vkg_gpt2_config *cfg, const vkg_gpt2_part *part,
                          vkg_gpt2_layout *lo)
{
    size_t sizes[VKG_GPT2_NUM_PARAM_TENSORS], whole = 0, at = 0;
    size_t L = (size_t)cfg->num_layers, nl = (size_t)(part->last - part->first);
    int embed = part->flags & VKG_GPT2_PART_EMBED, head = part->flags & VKG_GPT2_PART_HEAD;
    vkg_gpt2_param_sizes(cfg, sizes);
    for (int i = 0; i < VKG_GPT2_NUM_PARAM_TENSORS; i++) {
        int stacked = i >= 2 && i <= 13;
        size_t per = stacked ? sizes[i] / L : sizes[i];
        size_t count = stacked ? per * nl : 0, skip = stacked ? per * (size_t)part->first : 0;
        if (i == 0)
            count = embed || head ? sizes[i] : 0;
        else if (i == 1)
            count = embed ? sizes[i] : 0;
        else if (i >= 14)
            count = head ? sizes[i] : 0;
        lo->count[i] = count;
        lo->part_offset[i] = at;
        lo->whole_offset[i] = whole + skip;
        at += count;
        whole += sizes[i];
    }
    lo->total = at;
}

void vkg_gpt2_part_extract(const vkg_gpt2_layout *lo, const float *whole, float *part)
{
    for (int i = 0; i < VKG_GPT2_NUM_PARAM_TENSORS; i++)
        if (lo->count[i])
            memcpy(part + lo->part_offset[i], whole + lo->whole_offset[i], lo->count[i] * 4);
}

void vkg_gpt2_part_insert(const vkg_gpt2_layout *lo, const float *part, float *whole)
{
    for (int i = 0; i < VKG_GPT2_NUM_PARAM_TENSORS; i++)
        if (lo->count[i])
            memcpy(whole + lo->whole_offset[i], part + lo->part_offset[i], lo->count[i] * 4);
}
