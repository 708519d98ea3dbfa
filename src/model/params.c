/* The parameter table (see vkgpt/model.h): names, shapes, places, weight decay and
 * initialisation of a configuration's tensors, and the layout of a model part.
 * No allocation, no Vulkan. */
#include "vkgpt/model.h"

#include <string.h>

#include "base/error.h"

int vkg_model_pad_vocab(int vocab_size)
{
    return (vocab_size + 127) / 128 * 128;
}

vkg_status vkg_model_config_validate(const vkg_model_config *cfg)
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

static void add(vkg_param_table *t, const char *name, vkg_param_place place, int rows, int cols,
                int decays, vkg_param_init init, int L)
{
    vkg_param_info *p = &t->t[t->n++];
    *p = (vkg_param_info){.name = name,
                          .place = place,
                          .rows = rows,
                          .cols = cols,
                          .used_rows = rows,
                          .count = (size_t)rows * (size_t)cols * (place == VKG_PARAM_LAYER ? L : 1),
                          .offset = t->total,
                          .decays = decays,
                          .init = init};
    t->total += p->count;
}

void vkg_model_params(const vkg_model_config *cfg, vkg_param_table *t)
{
    int C = cfg->channels, L = cfg->num_layers;
    const vkg_param_place E = VKG_PARAM_EMBED, Y = VKG_PARAM_LAYER, H = VKG_PARAM_HEAD;
    const vkg_param_init N = VKG_INIT_NORMAL, R = VKG_INIT_RESIDUAL, Z = VKG_INIT_ZEROS,
                         O = VKG_INIT_ONES;
    memset(t, 0, sizeof *t);
    /* GPT-2, llm.c's order */
    add(t, "wte", E, cfg->padded_vocab_size, C, 1, N, L);
    t->t[0].used_rows = cfg->vocab_size;
    t->tied = 0;
    add(t, "wpe", E, cfg->max_seq_len, C, 1, N, L);
    add(t, "ln1w", Y, 1, C, 0, O, L);
    add(t, "ln1b", Y, 1, C, 0, Z, L);
    add(t, "qkvw", Y, 3 * C, C, 1, N, L);
    add(t, "qkvb", Y, 1, 3 * C, 0, Z, L);
    add(t, "attprojw", Y, C, C, 1, R, L);
    add(t, "attprojb", Y, 1, C, 0, Z, L);
    add(t, "ln2w", Y, 1, C, 0, O, L);
    add(t, "ln2b", Y, 1, C, 0, Z, L);
    add(t, "fcw", Y, 4 * C, C, 1, N, L);
    add(t, "fcb", Y, 1, 4 * C, 0, Z, L);
    add(t, "fcprojw", Y, C, 4 * C, 1, R, L);
    add(t, "fcprojb", Y, 1, C, 0, Z, L);
    add(t, "lnfw", H, 1, C, 0, O, L);
    add(t, "lnfb", H, 1, C, 0, Z, L);
}

size_t vkg_model_num_params(const vkg_model_config *cfg)
{
    vkg_param_table t;
    vkg_model_params(cfg, &t);
    return t.total;
}

void vkg_model_token_flops(const vkg_model_config *cfg, int T, double *layer, double *head)
{
    double C = cfg->channels;
    *layer = 24.0 * C * C + 4.0 * (double)T * C;
    *head = 2.0 * C * (double)cfg->padded_vocab_size;
}

vkg_model_part vkg_model_whole(const vkg_model_config *cfg)
{
    return (vkg_model_part){
        .first = 0, .last = cfg->num_layers, .flags = VKG_MODEL_PART_EMBED | VKG_MODEL_PART_HEAD};
}

vkg_status vkg_model_part_validate(const vkg_model_config *cfg, const vkg_model_part *p)
{
    int L = cfg->num_layers;
    VKG_CHECK(p->first >= 0 && p->first < p->last && p->last <= L, VKG_ERR_INVALID_ARG,
              "model part: layers [%d, %d) must be a non-empty range inside [0, %d)", p->first,
              p->last, L);
    VKG_CHECK(!(p->flags & ~(VKG_MODEL_PART_EMBED | VKG_MODEL_PART_HEAD)), VKG_ERR_INVALID_ARG,
              "model part: unknown flags 0x%x", (unsigned)p->flags);
    VKG_CHECK(!!(p->flags & VKG_MODEL_PART_EMBED) == (p->first == 0), VKG_ERR_INVALID_ARG,
              "model part: the embeddings belong to the part that starts at layer 0 (this one "
              "starts at %d)",
              p->first);
    VKG_CHECK(!!(p->flags & VKG_MODEL_PART_HEAD) == (p->last == L), VKG_ERR_INVALID_ARG,
              "model part: the head belongs to the part that ends at layer %d (this one ends at "
              "%d)",
              L, p->last);
    return VKG_OK;
}

void vkg_model_part_layout(const vkg_model_config *cfg, const vkg_model_part *part,
                           vkg_model_layout *lo)
{
    vkg_param_table t;
    vkg_model_params(cfg, &t);
    size_t at = 0, nl = (size_t)(part->last - part->first);
    int embed = part->flags & VKG_MODEL_PART_EMBED, head = part->flags & VKG_MODEL_PART_HEAD;
    memset(lo, 0, sizeof *lo);
    lo->n = t.n;
    for (int i = 0; i < t.n; i++) {
        const vkg_param_info *p = &t.t[i];
        size_t count = 0, skip = 0;
        if (p->place == VKG_PARAM_LAYER) {
            size_t per = p->count / (size_t)cfg->num_layers;
            count = per * nl, skip = per * (size_t)part->first;
        } else if (p->place == VKG_PARAM_EMBED) {
            count = embed || (head && i == t.tied) ? p->count : 0;
        } else {
            count = head ? p->count : 0;
        }
        lo->count[i] = count;
        lo->part_offset[i] = at;
        lo->whole_offset[i] = p->offset + skip;
        at += count;
    }
    lo->total = at;
    lo->tied = t.tied >= 0 ? lo->count[t.tied] : 0;
}

void vkg_model_part_extract(const vkg_model_layout *lo, const float *whole, float *part)
{
    for (int i = 0; i < lo->n; i++)
        if (lo->count[i])
            memcpy(part + lo->part_offset[i], whole + lo->whole_offset[i], lo->count[i] * 4);
}

void vkg_model_part_insert(const vkg_model_layout *lo, const float *part, float *whole)
{
    for (int i = 0; i < lo->n; i++)
        if (lo->count[i])
            memcpy(whole + lo->whole_offset[i], part + lo->part_offset[i], lo->count[i] * 4);
}
