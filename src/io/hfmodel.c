/* A model as a Hugging Face directory (see vkgpt/io.h): config.json and model.safetensors (or a
 * sharded model.safetensors.index.json), with the tensor names and layouts transformers uses:
 * GPT-2's `transformer.h.N...` with its Conv1D weights stored (in, out), the transpose of
 * vkgpt's (out, in); the Llama family's `model.layers.N...` with q, k and v (and SwiGLU's gate
 * and up) as separate tensors that vkgpt keeps stacked in one. The padded vocabulary's rows are
 * not written and read back as zeros. Each of vkgpt's tensors maps to one or more pieces: a
 * named tensor of the file that is a block of rows of one layer's slice, transposed or not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "vkgpt/io.h"

#define MAX_PIECES 3 /* q, k and v */

typedef struct piece {
    char name[160];
    int rows, cols; /* the file's shape: rows x cols, or a vector of cols when rows == 0 */
    int transposed; /* the file holds the transpose of vkgpt's rows x cols block */
    size_t at;      /* floats from the start of the whole parameter vector */
    int our_rows;   /* vkgpt's block: our_rows x our_cols, row-major at `at` */
    int our_cols;
} piece;

/* One piece: the file's tensor name, its shape (rows 0: a vector of cols), whether it is the
 * transpose of vkgpt's block, and where the block starts. */
static int one(piece *p, const char *name, int rows, int cols, int transposed, size_t at)
{
    snprintf(p->name, sizeof p->name, "%s", name);
    p->rows = rows, p->cols = cols, p->transposed = transposed, p->at = at;
    p->our_rows = transposed ? cols : rows ? rows : 1;
    p->our_cols = transposed ? rows : cols;
    return 1;
}

/* The pieces of tensor i of table t at layer l (l = 0 for tensors not per layer); -1 for a
 * tensor the family has no name for. */
static int pieces_of(const vkg_model_config *c, const vkg_param_table *t, int i, int l, piece *p)
{
    const vkg_param_info *x = &t->t[i];
    int gpt2 = c->pos == VKG_POS_LEARNED, rows = x->rows, cols = x->cols;
    size_t at = x->offset + (x->place == VKG_PARAM_LAYER ? (size_t)l * rows * cols : 0);
    int vec = rows == 1, V = c->vocab_size;
    const char *n = x->name;
    char name[160];
    if (!strcmp(n, "wte"))
        return one(p, gpt2 ? "transformer.wte.weight" : "model.embed_tokens.weight", V, cols, 0,
                   at);
    if (!strcmp(n, "lm_head"))
        return one(p, "lm_head.weight", V, cols, 0, at);
    if (gpt2) {
        static const struct {
            const char *ours, *theirs;
        } map[] = {{"ln1w", "ln_1.weight"},
                   {"ln1b", "ln_1.bias"},
                   {"qkvw", "attn.c_attn.weight"},
                   {"qkvb", "attn.c_attn.bias"},
                   {"attprojw", "attn.c_proj.weight"},
                   {"attprojb", "attn.c_proj.bias"},
                   {"ln2w", "ln_2.weight"},
                   {"ln2b", "ln_2.bias"},
                   {"fcw", "mlp.c_fc.weight"},
                   {"fcb", "mlp.c_fc.bias"},
                   {"fcprojw", "mlp.c_proj.weight"},
                   {"fcprojb", "mlp.c_proj.bias"}};
        if (!strcmp(n, "wpe"))
            return one(p, "transformer.wpe.weight", rows, cols, 0, at);
        if (!strcmp(n, "lnfw") || !strcmp(n, "lnfb"))
            return one(p, n[3] == 'w' ? "transformer.ln_f.weight" : "transformer.ln_f.bias", 0,
                       cols, 0, at);
        for (size_t k = 0; k < sizeof map / sizeof map[0]; k++)
            if (!strcmp(n, map[k].ours)) {
                snprintf(name, sizeof name, "transformer.h.%d.%s", l, map[k].theirs);
                return vec ? one(p, name, 0, cols, 0, at) /* Conv1D's weight is (in, out) */
                           : one(p, name, cols, rows, 1, at);
            }
        return -1;
    }
    static const struct {
        const char *ours, *theirs;
    } vecs[] = {{"ln1w", "input_layernorm.weight"},
                {"ln2w", "post_attention_layernorm.weight"},
                {"qnormw", "self_attn.q_norm.weight"},
                {"knormw", "self_attn.k_norm.weight"}},
      mats[] = {{"attprojw", "self_attn.o_proj.weight"}, {"fcprojw", "mlp.down_proj.weight"}};
    for (size_t k = 0; k < sizeof vecs / sizeof vecs[0]; k++)
        if (!strcmp(n, vecs[k].ours)) {
            snprintf(name, sizeof name, "model.layers.%d.%s", l, vecs[k].theirs);
            return one(p, name, 0, cols, 0, at);
        }
    for (size_t k = 0; k < sizeof mats / sizeof mats[0]; k++)
        if (!strcmp(n, mats[k].ours)) {
            snprintf(name, sizeof name, "model.layers.%d.%s", l, mats[k].theirs);
            return one(p, name, rows, cols, 0, at);
        }
    if (!strcmp(n, "lnfw"))
        return one(p, "model.norm.weight", 0, cols, 0, at);
    int NH = c->num_heads, NKV = vkg_model_kv_heads(c), D = vkg_model_head_dim(c);
    int F = vkg_model_mlp_hidden(c), np = 0, prow[3];
    const char *parts[3];
    if (!strcmp(n, "qkvw") || !strcmp(n, "qkvb")) {
        parts[0] = vec ? "self_attn.q_proj.bias" : "self_attn.q_proj.weight";
        parts[1] = vec ? "self_attn.k_proj.bias" : "self_attn.k_proj.weight";
        parts[2] = vec ? "self_attn.v_proj.bias" : "self_attn.v_proj.weight";
        prow[0] = NH * D, prow[1] = NKV * D, prow[2] = NKV * D, np = 3;
    } else if (!strcmp(n, "fcw")) {
        parts[0] = "mlp.gate_proj.weight", parts[1] = "mlp.up_proj.weight";
        prow[0] = F, prow[1] = F, np = 2;
    } else {
        return -1;
    }
    for (int k = 0; k < np; k++) { /* row blocks of the stacked tensor (of the vector: spans) */
        snprintf(name, sizeof name, "model.layers.%d.%s", l, parts[k]);
        one(p + k, name, vec ? 0 : prow[k], vec ? prow[k] : cols, 0, at);
        at += (size_t)prow[k] * (vec ? 1 : (size_t)cols);
    }
    return np;
}

/* Every piece of the model, in the table's order; *n of them; NULL (*st the error, with a
 * message) when out of memory or the configuration has a tensor no rule covers. */
static piece *all_pieces(const vkg_model_config *c, const vkg_param_table *t, int *n,
                         vkg_status *st)
{
    size_t cap = 0;
    for (int i = 0; i < t->n; i++)
        cap += (size_t)MAX_PIECES * (t->t[i].place == VKG_PARAM_LAYER ? c->num_layers : 1);
    piece *p = calloc(cap ? cap : 1, sizeof *p);
    if (!p) {
        *st = VKG_FAIL(VKG_ERR_NOMEM, "no memory for the model's tensor names");
        return NULL;
    }
    int k = 0;
    for (int i = 0; i < t->n; i++)
        for (int l = 0; l < (t->t[i].place == VKG_PARAM_LAYER ? c->num_layers : 1); l++) {
            int m = pieces_of(c, t, i, l, p + k);
            if (m < 0) {
                free(p);
                *st = VKG_FAIL(VKG_ERR_INVALID_ARG,
                               "tensor %s has no name in Hugging Face's layout of this family",
                               t->t[i].name);
                return NULL;
            }
            k += m;
        }
    *n = k;
    return p;
}

/* The piece's values in the file's order: a transpose into buf, else a pointer into params. */
static const float *file_order(const piece *p, const float *params, float *buf)
{
    if (!p->transposed)
        return params + p->at;
    const float *src = params + p->at; /* our_rows x our_cols, the file wants its transpose */
    for (int r = 0; r < p->our_rows; r++)
        for (int col = 0; col < p->our_cols; col++)
            buf[(size_t)col * p->our_rows + r] = src[(size_t)r * p->our_cols + col];
    return buf;
}

vkg_status vkg_hf_model_write(const char *dir, const vkg_model_config *cfg, const float *params,
                              int bf16)
{
    vkg_param_table t;
    VKG_TRY(vkg_model_config_validate(cfg));
    vkg_model_params(cfg, &t);
    VKG_TRY(vkg_io_make_dirs(dir));
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    VKG_TRY(vkg_hf_config_write(path, cfg));
    int n = 0;
    vkg_status pst = VKG_OK;
    piece *p = all_pieces(cfg, &t, &n, &pst);
    if (!p)
        return pst;
    size_t tbytes = 0;
    for (int k = 0; k < n; k++)
        tbytes += p[k].transposed ? (size_t)p[k].rows * p[k].cols * sizeof(float) : 0;
    vkg_st_tensor *ts = calloc((size_t)n, sizeof *ts);
    float *tbuf = malloc(tbytes ? tbytes : 1);
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, ts && tbuf, VKG_ERR_NOMEM, done, "no memory for %zu transposed bytes",
                   tbytes);
    size_t used = 0;
    for (int k = 0; k < n; k++) {
        ts[k].name = p[k].name;
        ts[k].dtype = bf16 ? VKG_ST_BF16 : VKG_ST_F32;
        ts[k].rank = p[k].rows ? 2 : 1;
        ts[k].shape[0] = p[k].rows ? p[k].rows : p[k].cols;
        ts[k].shape[1] = p[k].cols;
        ts[k].f32 = file_order(&p[k], params, tbuf + used);
        used += p[k].transposed ? (size_t)p[k].rows * p[k].cols : 0;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    static const char *const meta[] = {"format", "pt"};
    st = vkg_safetensors_write(path, ts, n, meta, 1);
done:
    free(ts), free(tbuf), free(p);
    return st;
}

/* The open file holding tensor name: the one file, or the index's shard (opened on demand). */
typedef struct source {
    const char *dir;
    vkg_safetensors *one;
    vkg_st_index idx;
    int sharded;
    char open_name[256];
    vkg_safetensors *shard;
} source;

static vkg_status find(source *s, const char *name, vkg_safetensors **f, const vkg_st_info **info,
                       const char **file)
{
    *f = s->one, *file = "model.safetensors";
    if (s->sharded) {
        const char *shard = vkg_safetensors_index_lookup(&s->idx, name);
        VKG_CHECK(shard, VKG_ERR_FORMAT,
                  "%s/model.safetensors.index.json: no tensor %s (the model's configuration needs "
                  "it)",
                  s->dir, name);
        if (strcmp(shard, s->open_name)) {
            char path[4400];
            vkg_safetensors_close(&s->shard);
            snprintf(path, sizeof path, "%s/%s", s->dir, shard);
            VKG_TRY(vkg_safetensors_open(path, &s->shard));
            snprintf(s->open_name, sizeof s->open_name, "%s", shard);
        }
        *f = s->shard, *file = shard;
    }
    *info = vkg_safetensors_find(*f, name);
    VKG_CHECK(*info, VKG_ERR_FORMAT, "%s/%s: no tensor %s (the model's configuration needs it)",
              s->dir, *file, name);
    return VKG_OK;
}

vkg_status vkg_hf_model_read(const char *dir, vkg_model_config *cfg, float **params)
{
    *params = NULL;
    char path[4400];
    vkg_model_config c;
    snprintf(path, sizeof path, "%s/config.json", dir);
    VKG_TRY(vkg_hf_config_read(path, &c));
    vkg_param_table t;
    vkg_model_params(&c, &t);
    int n = 0;
    vkg_status pst = VKG_OK;
    piece *p = all_pieces(&c, &t, &n, &pst);
    if (!p)
        return pst;
    source s = {.dir = dir};
    vkg_status st = VKG_OK;
    float *x = calloc(t.total ? t.total : 1, sizeof *x), *tmp = NULL;
    size_t tmp_cap = 0;
    VKG_CHECK_GOTO(st, x, VKG_ERR_NOMEM, done, "no memory for %zu parameters", t.total);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FILE *probe = fopen(path, "rb");
    if (probe) {
        fclose(probe);
        s.sharded = 1;
        VKG_TRY_GOTO(st, vkg_safetensors_index_read(path, &s.idx), done);
    } else {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        VKG_TRY_GOTO(st, vkg_safetensors_open(path, &s.one), done);
    }
    for (int k = 0; k < n && st == VKG_OK; k++) {
        vkg_safetensors *f;
        const vkg_st_info *info;
        const char *file;
        VKG_TRY_GOTO(st, find(&s, p[k].name, &f, &info, &file), done);
        int want_rank = p[k].rows ? 2 : 1;
        int64_t r0 = p[k].rows ? p[k].rows : p[k].cols;
        VKG_CHECK_GOTO(st,
                       info->rank == want_rank && info->shape[0] == r0 &&
                           (want_rank == 1 || info->shape[1] == p[k].cols),
                       VKG_ERR_FORMAT, done,
                       "%s/%s: tensor %s has the wrong shape for config.json (expected %lld x "
                       "%d)",
                       dir, file, p[k].name, (long long)r0, want_rank == 2 ? p[k].cols : 1);
        size_t count = (size_t)info->numel;
        if (!p[k].transposed) {
            st = vkg_safetensors_read_f32(f, p[k].name, x + p[k].at, count);
            continue;
        }
        if (tmp_cap < count) {
            free(tmp);
            tmp = malloc(count * sizeof *tmp);
            tmp_cap = tmp ? count : 0;
            VKG_CHECK_GOTO(st, tmp, VKG_ERR_NOMEM, done, "no memory for tensor %s", p[k].name);
        }
        VKG_TRY_GOTO(st, vkg_safetensors_read_f32(f, p[k].name, tmp, count), done);
        float *dst = x + p[k].at; /* ours: our_rows x our_cols = the file's transpose */
        for (int r = 0; r < p[k].our_rows; r++)
            for (int col = 0; col < p[k].our_cols; col++)
                dst[(size_t)r * p[k].our_cols + col] = tmp[(size_t)col * p[k].our_rows + r];
    }
done:
    vkg_safetensors_close(&s.one);
    vkg_safetensors_close(&s.shard);
    if (s.sharded)
        vkg_safetensors_index_deinit(&s.idx);
    free(p), free(tmp);
    if (st != VKG_OK) {
        free(x);
        return st;
    }
    *cfg = c;
    *params = x;
    return VKG_OK;
}
