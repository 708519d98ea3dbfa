/* The vkgpt state file: a 256-slot header driven by one field table, AdamW m and v, and a CRC-32
 * trailer (layout in checkpoint.h). Writes go through vkg_io_write_atomic; reads refuse short,
 * oversized, foreign, wrong-version and corrupted files by name. Checkpoint directories are
 * checkpoint.c's business; nothing here prints. */
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/io_internal.h"
#include "train/checkpoint.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HOST_BIG_ENDIAN 1
#else
#define HOST_BIG_ENDIAN 0
#endif

#define CHUNK_FLOATS 16384
#define SLOT_NPARAMS 54
#define MAX_PARAMS 4.0e12 /* as for model files: anything larger is a corrupt header */

_Static_assert(sizeof(vkg_schedule_kind) == 4, "the schedule kind is stored in one 32-bit slot");

/* ---- CRC-32 (IEEE 802.3 / zlib, reflected 0xedb88320), slicing by 8 ------------------------- */

typedef struct crc32_tab {
    uint32_t t[8][256];
} crc32_tab;

static void crc32_init(crc32_tab *c)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t r = i;
        for (int k = 0; k < 8; k++)
            r = (r & 1u) ? (r >> 1) ^ 0xedb88320u : r >> 1;
        c->t[0][i] = r;
    }
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++)
            c->t[k][i] = (c->t[k - 1][i] >> 8) ^ c->t[0][c->t[k - 1][i] & 255u];
}

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void wr32(unsigned char *p, uint32_t v)
{
    for (int b = 0; b < 4; b++)
        p[b] = (unsigned char)(v >> (8 * b));
}

static uint32_t crc32_update(const crc32_tab *c, uint32_t crc, const void *data, size_t n)
{
    const unsigned char *p = data;
    const uint32_t(*t)[256] = c->t;
    crc = ~crc;
    for (; n >= 8; p += 8, n -= 8) {
        uint32_t a = crc ^ rd32(p), b = rd32(p + 4);
        crc = t[7][a & 255u] ^ t[6][(a >> 8) & 255u] ^ t[5][(a >> 16) & 255u] ^ t[4][a >> 24] ^
              t[3][b & 255u] ^ t[2][(b >> 8) & 255u] ^ t[1][(b >> 16) & 255u] ^ t[0][b >> 24];
    }
    while (n--)
        crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 255u];
    return ~crc;
}

/* ---- the header, one table ------------------------------------------------------------------ */

/* Everything the header holds besides magic, version and the parameter count. */
typedef struct header_fields {
    vkg_model_config cfg;
    vkg_checkpoint_state st;
} header_fields;

/* A field: its first slot, its width in bytes (4: int/float bits in one slot; 8: a u64 in two,
 * low half first), how many consecutive values, and where it lives in header_fields. */
typedef struct field {
    short slot, width, count;
    size_t off;
} field;

/* clang-format off */
#define F(slot, width, count, member) {slot, width, count, offsetof(header_fields, member)}
/* clang-format on */
static const field FIELDS[] = {
    F(2, 4, 1, cfg.max_seq_len),
    F(3, 4, 1, cfg.vocab_size),
    F(4, 4, 1, cfg.num_layers),
    F(5, 4, 1, cfg.num_heads),
    F(6, 4, 1, cfg.channels),
    F(7, 4, 1, cfg.padded_vocab_size),
    F(8, 4, 1, st.hp.batch_size),
    F(9, 4, 1, st.hp.seq_len),
    F(10, 8, 1, st.hp.total_batch),
    F(12, 4, 1, st.hp.world_size),
    F(13, 4, 1, st.hp.shuffle),
    F(14, 8, 1, st.hp.seed),
    F(16, 4, 1, st.hp.schedule.kind),
    F(17, 4, 1, st.hp.schedule.total_steps),
    F(18, 4, 1, st.hp.schedule.warmup),
    F(19, 4, 1, st.hp.schedule.lr),
    F(20, 4, 1, st.hp.schedule.lr_min_frac),
    F(21, 4, 1, st.hp.weight_decay),
    F(22, 4, 1, st.hp.beta1),
    F(23, 4, 1, st.hp.beta2),
    F(24, 4, 1, st.hp.eps),
    F(25, 4, 1, st.hp.grad_clip),
    F(26, 4, 1, st.loss_scale),
    F(28, 8, 1, st.loss_scale_good),
    F(32, 8, 1, st.step),
    F(34, 8, 1, st.tokens),
    F(36, 8, VKG_CHECKPOINT_NUM_RNG, st.rng),
    F(44, 8, 1, st.data_pos.epoch),
    F(46, 8, 1, st.data_pos.batch),
    F(48, 8, 1, st.data_pos.num_batches),
    F(50, 8, 1, st.data_pos.shuffle),
    F(52, 8, 1, st.data_pos.seed),
    F(56, 4, 1, st.params_crc),
    F(57, 4, 1, st.params_crc_set),
    /* the family's fields (0 in files written before them: GPT-2) */
    F(64, 4, 1, cfg.num_kv_heads),
    F(65, 4, 1, cfg.head_dim),
    F(66, 4, 1, cfg.mlp_hidden),
    F(67, 4, 1, cfg.mlp),
    F(68, 4, 1, cfg.norm),
    F(69, 4, 1, cfg.norm_eps),
    F(70, 4, 1, cfg.pos),
    F(71, 4, 1, cfg.rope_theta),
    F(72, 4, 1, cfg.rope_factor),
    F(73, 4, 1, cfg.rope_low_freq_factor),
    F(74, 4, 1, cfg.rope_high_freq_factor),
    F(75, 4, 1, cfg.rope_original_max),
    F(76, 4, 1, cfg.qk_norm),
    F(77, 4, 1, cfg.bias),
    F(78, 4, 1, cfg.untied),
};
#undef F
#define NUM_FIELDS (sizeof FIELDS / sizeof FIELDS[0])

static void encode_header(unsigned char *h, const header_fields *hf, uint64_t n)
{
    memset(h, 0, VKG_FILE_HEADER_BYTES);
    wr32(h, VKG_STATE_MAGIC);
    wr32(h + 4, VKG_STATE_VERSION);
    for (size_t i = 0; i < NUM_FIELDS; i++) {
        const unsigned char *src = (const unsigned char *)hf + FIELDS[i].off;
        for (int k = 0; k < FIELDS[i].count; k++) {
            unsigned char *dst = h + 4 * FIELDS[i].slot + FIELDS[i].width * k;
            uint64_t x = 0;
            if (FIELDS[i].width == 8) {
                memcpy(&x, src + 8 * k, 8);
            } else {
                uint32_t u;
                memcpy(&u, src + 4 * k, 4);
                x = u;
            }
            wr32(dst, (uint32_t)x);
            if (FIELDS[i].width == 8)
                wr32(dst + 4, (uint32_t)(x >> 32));
        }
    }
    wr32(h + 4 * SLOT_NPARAMS, (uint32_t)n);
    wr32(h + 4 * SLOT_NPARAMS + 4, (uint32_t)(n >> 32));
}

static void decode_header(const unsigned char *h, header_fields *hf)
{
    memset(hf, 0, sizeof *hf);
    for (size_t i = 0; i < NUM_FIELDS; i++) {
        unsigned char *dst = (unsigned char *)hf + FIELDS[i].off;
        for (int k = 0; k < FIELDS[i].count; k++) {
            const unsigned char *src = h + 4 * FIELDS[i].slot + FIELDS[i].width * k;
            if (FIELDS[i].width == 8) {
                uint64_t x = rd32(src) | (uint64_t)rd32(src + 4) << 32;
                memcpy(dst + 8 * k, &x, 8);
            } else {
                uint32_t u = rd32(src);
                memcpy(dst + 4 * k, &u, 4);
            }
        }
    }
}

/* ---- writing -------------------------------------------------------------------------------- */

typedef struct state_write_ctx {
    header_fields hf;
    const float *m, *v;
    size_t n;
    crc32_tab crc;
} state_write_ctx;

/* Write n floats little-endian (f NULL: write nothing), folding their file bytes into *crc. */
static vkg_status write_floats(FILE *f, const crc32_tab *tab, uint32_t *crc, const float *x,
                               size_t n)
{
    unsigned char buf[HOST_BIG_ENDIAN ? CHUNK_FLOATS * 4 : 1];
    for (size_t done = 0; done < n;) {
        size_t k = n - done < CHUNK_FLOATS ? n - done : CHUNK_FLOATS;
        const void *bytes = x + done;
        for (size_t i = 0; HOST_BIG_ENDIAN && i < k; i++) {
            uint32_t u;
            memcpy(&u, x + done + i, 4);
            wr32(buf + 4 * i, u);
            bytes = buf;
        }
        *crc = crc32_update(tab, *crc, bytes, k * 4);
        if (f)
            VKG_TRY(vkg_io_write_bytes(f, bytes, k * 4));
        done += k;
    }
    return VKG_OK;
}

uint32_t vkg_statefile_crc32_floats(const float *x, size_t n)
{
    crc32_tab *tab = malloc(sizeof *tab);
    if (!tab)
        return 0; /* callers compare: a wrong 0 is reported as a mismatch, never hidden */
    crc32_init(tab);
    uint32_t crc = 0;
    (void)write_floats(NULL, tab, &crc, x, n);
    free(tab);
    return crc;
}

static vkg_status write_state(FILE *f, void *ctx)
{
    state_write_ctx *c = ctx;
    unsigned char h[VKG_FILE_HEADER_BYTES], tail[4];
    encode_header(h, &c->hf, c->n);
    uint32_t crc = crc32_update(&c->crc, 0, h, sizeof h);
    VKG_TRY(vkg_io_write_bytes(f, h, sizeof h));
    VKG_TRY(write_floats(f, &c->crc, &crc, c->m, c->n));
    VKG_TRY(write_floats(f, &c->crc, &crc, c->v, c->n));
    wr32(tail, crc);
    return vkg_io_write_bytes(f, tail, sizeof tail);
}

vkg_status vkg_statefile_write(const char *path, const vkg_model_config *cfg,
                               const vkg_checkpoint_state *st, const float *m, const float *v)
{
    VKG_CHECK(path && cfg && st && m && v, VKG_ERR_INVALID_ARG, "state file: NULL argument");
    if (vkg_model_config_validate(cfg) < 0)
        return vkg__error_wrap(VKG_ERR_INVALID_ARG, "%s: not writing an invalid model", path);
    state_write_ctx *c = malloc(sizeof *c);
    VKG_CHECK(c, VKG_ERR_NOMEM, "%s: out of memory", path);
    c->hf.cfg = *cfg;
    c->hf.st = *st;
    c->m = m;
    c->v = v;
    c->n = vkg_model_num_params(cfg);
    crc32_init(&c->crc);
    vkg_status s = vkg_io_write_atomic(path, write_state, c);
    free(c);
    return s;
}

/* ---- reading -------------------------------------------------------------------------------- */

/* Read n floats into x, folding their file bytes into *crc. */
static vkg_status read_floats(FILE *f, const char *path, const crc32_tab *tab, uint32_t *crc,
                              float *x, size_t n)
{
    for (size_t done = 0; done < n;) {
        size_t k = n - done < CHUNK_FLOATS ? n - done : CHUNK_FLOATS;
        VKG_TRY(vkg_io_read_bytes(f, path, x + done, k * 4));
        *crc = crc32_update(tab, *crc, x + done, k * 4);
        for (size_t i = 0; HOST_BIG_ENDIAN && i < k; i++) {
            uint32_t u = rd32((const unsigned char *)(x + done + i));
            memcpy(x + done + i, &u, 4);
        }
        done += k;
    }
    return VKG_OK;
}

/* Whether a valid configuration read from a header can be counted: the parameter table's
 * dimensions (computed in int by vkg_model_params) fit an int and the total (an upper bound of
 * the table's, computed in double so that nothing wraps) is below MAX_PARAMS. */
static int plausible(const vkg_model_config *c, double *approx)
{
    double C = c->channels, NH = c->num_heads, Vp = c->padded_vocab_size;
    double NKV = c->num_kv_heads ? c->num_kv_heads : NH;
    double D = c->head_dim ? c->head_dim : C / NH; /* validated: NH divides C without head_dim */
    double F = c->mlp_hidden ? c->mlp_hidden : 4.0 * C;
    double qkv = (NH + 2.0 * NKV) * D, fc = (c->mlp == VKG_MLP_SWIGLU ? 2.0 : 1.0) * F;
    /* per layer: q, k, v and their biases, q/k norms, the output projection and its bias, two
     * norms with biases, the MLP's products and biases */
    double layer = qkv * C + qkv + 2.0 * D + C * NH * D + C + 4.0 * C + fc * C + fc + F * C + C;
    *approx = Vp * C * (c->untied ? 2.0 : 1.0) + (double)c->max_seq_len * C + 2.0 * C +
              (double)c->num_layers * layer;
    return qkv < INT_MAX && NH * D < INT_MAX && fc < INT_MAX && 4.0 * C < INT_MAX &&
           *approx < MAX_PARAMS;
}

/* Check the header h of a file of `size` bytes; fills *hf and the parameter count *n. */
static vkg_status check_header(const char *path, const unsigned char *h, uint64_t size,
                               header_fields *hf, size_t *n)
{
    long magic = (long)(int32_t)rd32(h), version = (long)(int32_t)rd32(h + 4);
    VKG_CHECK(magic == VKG_STATE_MAGIC, VKG_ERR_FORMAT,
              "%s: bad magic %ld, expected %d (not a vkgpt state file)", path, magic,
              VKG_STATE_MAGIC);
    VKG_CHECK(version == VKG_STATE_VERSION, VKG_ERR_FORMAT,
              "%s: unsupported state file version %ld (expected %d)", path, version,
              VKG_STATE_VERSION);
    decode_header(h, hf);
    if (vkg_model_config_validate(&hf->cfg) < 0)
        return vkg__error_wrap(VKG_ERR_FORMAT, "%s: bad model configuration in the header", path);
    double approx;
    VKG_CHECK(plausible(&hf->cfg, &approx), VKG_ERR_FORMAT,
              "%s: header describes an implausible model (about %.3g parameters, or a tensor "
              "dimension past 2^31)",
              path, approx);
    const unsigned char *pn = h + 4 * SLOT_NPARAMS;
    uint64_t np = rd32(pn) | (uint64_t)rd32(pn + 4) << 32;
    VKG_CHECK(np == vkg_model_num_params(&hf->cfg), VKG_ERR_FORMAT,
              "%s: header holds %llu parameters but its model configuration has %zu", path,
              (unsigned long long)np, vkg_model_num_params(&hf->cfg));
    char what[96];
    snprintf(what, sizeof what, "AdamW m and v of %llu parameters", (unsigned long long)np);
    VKG_TRY(vkg__io_check_size(path, size, VKG_FILE_HEADER_BYTES + 8 * np + 4, what));
    *n = (size_t)np;
    return VKG_OK;
}

vkg_status vkg__statefile_read_stream(FILE *f, const char *path, uint64_t size,
                                      vkg_model_config *cfg, vkg_checkpoint_state *st,
                                      size_t *num_params, float **m, float **v)
{
    unsigned char h[VKG_FILE_HEADER_BYTES], tail[4];
    float *mm = NULL, *vv = NULL;
    crc32_tab *tab = NULL;
    header_fields hf;
    size_t n = 0;
    vkg_status s;
    VKG_CHECK(!m == !v, VKG_ERR_INVALID_ARG, "%s: pass both m and v or neither", path);
    VKG_CHECK(size >= VKG_FILE_HEADER_BYTES, VKG_ERR_FORMAT,
              "%s: file is %llu bytes, too short for the %d-byte header of a state file", path,
              (unsigned long long)size, VKG_FILE_HEADER_BYTES);
    VKG_TRY(vkg_io_read_bytes(f, path, h, sizeof h));
    VKG_TRY(check_header(path, h, size, &hf, &n));
    if (m) {
        tab = malloc(sizeof *tab);
        mm = malloc((n ? n : 1) * sizeof *mm);
        vv = malloc((n ? n : 1) * sizeof *vv);
        VKG_CHECK_GOTO(s, tab && mm && vv, VKG_ERR_NOMEM, fail,
                       "%s: cannot allocate the moments of %zu parameters", path, n);
        crc32_init(tab);
        uint32_t crc = crc32_update(tab, 0, h, sizeof h);
        VKG_TRY_GOTO(s, read_floats(f, path, tab, &crc, mm, n), fail);
        VKG_TRY_GOTO(s, read_floats(f, path, tab, &crc, vv, n), fail);
        VKG_TRY_GOTO(s, vkg_io_read_bytes(f, path, tail, sizeof tail), fail);
        VKG_CHECK_GOTO(s, rd32(tail) == crc, VKG_ERR_FORMAT, fail,
                       "%s: checksum mismatch (stored CRC-32 %08lx, computed %08lx): the file is "
                       "corrupted",
                       path, (unsigned long)rd32(tail), (unsigned long)crc);
        const char *why = "AdamW's moments must be finite and v >= 0 (a diverged run or a "
                          "damaged file)";
        VKG_TRY_GOTO(s,
                     vkg_statefile_check_values(VKG_ERR_FORMAT, path, "AdamW first moment m",
                                                &hf.cfg, mm, 0, why),
                     fail);
        VKG_TRY_GOTO(s,
                     vkg_statefile_check_values(VKG_ERR_FORMAT, path, "AdamW second moment v",
                                                &hf.cfg, vv, 1, why),
                     fail);
        free(tab);
        *m = mm;
        *v = vv;
    }
    *cfg = hf.cfg;
    *st = hf.st;
    *num_params = n;
    return VKG_OK;
fail:
    free(vv);
    free(mm);
    free(tab);
    return s;
}

vkg_status vkg_statefile_check_values(vkg_status code, const char *where, const char *what,
                                      const vkg_model_config *cfg, const float *x, int nonneg,
                                      const char *why)
{
    vkg_param_table t;
    vkg_model_params(cfg, &t);
    for (int i = 0; i < t.n; i++)
        for (size_t k = 0; k < t.t[i].count; k++) {
            float y = x[t.t[i].offset + k];
            VKG_CHECK(isfinite(y) && (!nonneg || y >= 0.0f), code,
                      "%s: %s of tensor %s, element %zu, is %g: %s", where, what, t.t[i].name, k,
                      (double)y, why);
        }
    return VKG_OK;
}

vkg_status vkg_statefile_read(const char *path, vkg_model_config *cfg, vkg_checkpoint_state *st,
                              size_t *num_params, float **m, float **v)
{
    FILE *f = NULL;
    uint64_t size = 0;
    VKG_CHECK(!m == !v, VKG_ERR_INVALID_ARG, "%s: pass both m and v or neither", path);
    VKG_TRY(vkg__io_open(path, &f, &size));
    vkg_status s = vkg__statefile_read_stream(f, path, size, cfg, st, num_params, m, v);
    fclose(f);
    return s;
}
