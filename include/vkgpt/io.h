/* llm.c-compatible files, Hugging Face's safetensors files, and crash-safe writing.
 *
 * Four formats, all little-endian with a header of 256 int32 (1024 bytes):
 *   model        20240326, version (3 = fp32, 5 = bf16), maxT, V, L, NH, C, Vp; the 16 tensors of
 *                include/vkgpt/model.h in table order
 *   debug state  20240327, 2, B, T; x int32[B*T], y int32[B*T], logits f32[B*T*V] (V columns, not
 *                Vp, as llm.c writes them), loss f32, grads f32[num_params] (table order, Vp rows)
 *   tokenizer    20240328, 2, V, eot; per token a uint8 length (>= 1) then that many bytes
 *   token shard  20240520, 1, ntok; ntok uint16 tokens; the file is exactly 1024 + 2*ntok bytes
 * Readers refuse truncated, oversized, foreign or inconsistent files with VKG_ERR_FORMAT (or
 * VKG_ERR_IO when the system call fails) and a message that names the file and the problem.
 * Every writer goes through vkg_io_write_atomic, so a failed or interrupted write leaves any
 * existing file untouched. This module knows nothing of devices; it only moves host memory.
 * Safetensors files (docs/FORMATS.md) are read and written too: a little-endian uint64 header
 * size, a JSON header naming each tensor's dtype, shape and byte range, then the data.
 */
#ifndef VKGPT_IO_H
#define VKGPT_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "vkgpt/model.h"
#include "vkgpt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VKG_FILE_HEADER_INTS 256
#define VKG_FILE_HEADER_BYTES 1024
#define VKG_MODEL_MAGIC 20240326
#define VKG_DEBUG_STATE_MAGIC 20240327
#define VKG_TOKENIZER_MAGIC 20240328
#define VKG_SHARD_MAGIC 20240520

/* ---- crash-safe writing and little-endian helpers ------------------------------------------ */

/* Writes the payload of a file to f; returns VKG_OK or an error (with a message recorded). */
typedef vkg_status (*vkg_io_write_fn)(FILE *f, void *ctx);

/* Replace the file at path with what write_fn produces, crash-safely: the payload goes to a new
 * temporary file in the same directory, which is flushed, fsync'ed, renamed over path, and then
 * the directory is fsync'ed. If write_fn fails, or any step before the rename fails, the
 * temporary file is removed and an existing file at path is left exactly as it was. The new file
 * gets the usual 0666 & ~umask permissions. Errors: write_fn's status, or VKG_ERR_IO naming path
 * and the failing step. ctx is passed through and not kept. */
vkg_status vkg_io_write_atomic(const char *path, vkg_io_write_fn write_fn, void *ctx);

/* Create the folder path and every missing folder above it (mode 0755 & ~umask), as `mkdir -p`;
 * folders that exist already are fine. Errors: VKG_ERR_INVALID_ARG for an empty path or one
 * longer than 4095 bytes, VKG_ERR_IO naming the folder that could not be created and why (a file
 * of that name in the way, no permission). */
vkg_status vkg_io_make_dirs(const char *path);

/* Write n bytes / n little-endian int32 / n little-endian float32 / n little-endian uint16 to f.
 * VKG_ERR_IO (with strerror) on a short write. For use inside vkg_io_write_fn callbacks. */
vkg_status vkg_io_write_bytes(FILE *f, const void *data, size_t n);
vkg_status vkg_io_write_i32(FILE *f, const int32_t *x, size_t n);
vkg_status vkg_io_write_f32(FILE *f, const float *x, size_t n);
vkg_status vkg_io_write_u16(FILE *f, const uint16_t *x, size_t n);

/* Read exactly n bytes / int32 / float32 / uint16 (little-endian in the file) from f. path names
 * the file in messages. A short read is VKG_ERR_FORMAT ("<path>: file ends early ..."), a read
 * error VKG_ERR_IO. */
vkg_status vkg_io_read_bytes(FILE *f, const char *path, void *data, size_t n);
vkg_status vkg_io_read_i32(FILE *f, const char *path, int32_t *x, size_t n);
vkg_status vkg_io_read_f32(FILE *f, const char *path, float *x, size_t n);
vkg_status vkg_io_read_u16(FILE *f, const char *path, uint16_t *x, size_t n);

/* ---- model file ----------------------------------------------------------------------------- */

/* Read and validate the header of a model file: magic, version 3 or 5, a configuration that
 * passes vkg_model_config_validate, and a file size equal to 1024 bytes plus the parameters at
 * the version's precision. Fills *cfg and, when version is not NULL, *version. Errors:
 * VKG_ERR_IO (cannot open/stat), VKG_ERR_FORMAT (anything else), naming the file. */
vkg_status vkg_modelfile_read_header(const char *path, vkg_model_config *cfg, int *version);

/* Read a model file into the caller's buffer of `capacity` floats (which must hold
 * vkg_model_num_params(cfg) values), converting bf16 (version 5) to fp32. Fills *cfg. Errors as
 * vkg_modelfile_read_header, plus VKG_ERR_INVALID_ARG when the buffer is too small. */
vkg_status vkg_modelfile_read_into(const char *path, vkg_model_config *cfg, float *params,
                                   size_t capacity);

/* Read a model file into a newly malloc'ed fp32 array (*params, num_params values; the caller
 * frees it with free()). Fills *cfg. On error *params is NULL. */
vkg_status vkg_modelfile_read(const char *path, vkg_model_config *cfg, float **params);

/* Write cfg and params (vkg_model_num_params(cfg) floats, table order) as an fp32 version-3 model
 * file, crash-safely. VKG_ERR_INVALID_ARG for an invalid cfg; VKG_ERR_IO naming the file. */
vkg_status vkg_modelfile_write(const char *path, const vkg_model_config *cfg, const float *params);

/* bf16 <-> fp32. bf16 is the upper 16 bits of an fp32; to bf16 rounds to nearest even (NaN
 * stays NaN). */
float vkg_bf16_to_f32(uint16_t h);
uint16_t vkg_f32_to_bf16(float f);

/* IEEE half (f16) <-> fp32: to fp32 is exact; to f16 rounds to nearest even, overflows to
 * infinity, keeps subnormals, and keeps NaN a (quiet) NaN. */
float vkg_f16_to_f32(uint16_t h);
uint16_t vkg_f32_to_f16(float f);

/* ---- debug state file ----------------------------------------------------------------------- */

typedef struct vkg_debug_state {
    int batch_size; /* B */
    int seq_len;    /* T */
    int vocab_size; /* V: the logits' row length */
    int32_t *x;     /* (B,T) inputs */
    int32_t *y;     /* (B,T) targets */
    float *logits;  /* (B,T,V) */
    float loss;     /* mean cross-entropy */
    float *grads;   /* (num_params) gradients in table order, wte with Vp rows */
    size_t num_params;
} vkg_debug_state;

/* Read a debug state file written for the model cfg (the header holds only B and T; V and the
 * parameter count come from cfg). Allocates the arrays of *st (free with vkg_debugstate_deinit).
 * Errors: VKG_ERR_IO / VKG_ERR_FORMAT naming the file (bad magic or version, non-positive B or T,
 * size not 1024 + 4*(2BT + BTV + 1 + num_params)); on error *st is left empty. */
vkg_status vkg_debugstate_read(const char *path, const vkg_model_config *cfg, vkg_debug_state *st);

/* Write st as a debug state file, crash-safely. st->vocab_size and st->num_params must match cfg
 * (VKG_ERR_INVALID_ARG otherwise). */
vkg_status vkg_debugstate_write(const char *path, const vkg_model_config *cfg,
                                const vkg_debug_state *st);

/* Free the arrays of st and zero it. NULL-safe. */
void vkg_debugstate_deinit(vkg_debug_state *st);

/* ---- tokenizer (decode) file ---------------------------------------------------------------- */

typedef struct vkg_tokfile {
    int vocab_size;  /* V */
    int eot_token;   /* end-of-text token id */
    size_t *offsets; /* (V+1): token i is bytes[offsets[i] .. offsets[i+1]) */
    char *bytes;     /* all token bytes back to back (not NUL-terminated) */
} vkg_tokfile;

/* Read a tokenizer file (version 2; version 1 files, which predate the eot field, are accepted
 * only with V = 50257 and eot 50256 as llm.c does). Allocates tf's arrays (free with
 * vkg_tokfile_deinit). Errors: VKG_ERR_IO / VKG_ERR_FORMAT naming the file (bad magic/version,
 * eot out of range, a zero-length token, file ending early or holding trailing bytes). */
vkg_status vkg_tokfile_read(const char *path, vkg_tokfile *tf);

/* Write tf as a version-2 tokenizer file, crash-safely. Every token must be 1..255 bytes and eot
 * in [0, V) (VKG_ERR_INVALID_ARG naming the token otherwise). */
vkg_status vkg_tokfile_write(const char *path, const vkg_tokfile *tf);

/* Free tf's arrays and zero it. NULL-safe. */
void vkg_tokfile_deinit(vkg_tokfile *tf);

/* ---- token shard ---------------------------------------------------------------------------- */

/* Read and validate a shard header: magic, version 1, ntok >= 0 and a file size of exactly
 * 1024 + 2*ntok bytes. Sets *ntok. Errors VKG_ERR_IO / VKG_ERR_FORMAT naming the file. */
vkg_status vkg_shard_read_header(const char *path, size_t *ntok);

/* Read a whole shard into a newly malloc'ed array (*tokens, *ntok values; free with free()).
 * Errors as vkg_shard_read_header; on error *tokens is NULL. */
vkg_status vkg_shard_read(const char *path, uint16_t **tokens, size_t *ntok);

/* Write ntok tokens as a shard, crash-safely. ntok must fit the int32 header field
 * (VKG_ERR_INVALID_ARG otherwise). */
vkg_status vkg_shard_write(const char *path, const uint16_t *tokens, size_t ntok);

/* ---- safetensors (Hugging Face) ------------------------------------------------------------ */

#define VKG_ST_MAX_RANK 8
/* The largest JSON header read or written, as the safetensors library caps it. */
#define VKG_ST_MAX_HEADER 100000000

/* Element types, named in the file as the library names them ("F32", "BF16", ...). The first
 * three convert to and from fp32; the others are listed and read as raw bytes only. The
 * library's sub-byte types (F4, F6_E2M3, F6_E3M2) are not known: files holding them are
 * refused. */
typedef enum vkg_st_dtype {
    VKG_ST_F32,
    VKG_ST_BF16,
    VKG_ST_F16,
    VKG_ST_F64,
    VKG_ST_I64,
    VKG_ST_I32,
    VKG_ST_I16,
    VKG_ST_I8,
    VKG_ST_U64,
    VKG_ST_U32,
    VKG_ST_U16,
    VKG_ST_U8,
    VKG_ST_BOOL,
    VKG_ST_F8_E4M3,
    VKG_ST_F8_E5M2,
    VKG_ST_F8_E4M3FNUZ,
    VKG_ST_F8_E5M2FNUZ,
    VKG_ST_F8_E8M0,
    VKG_ST_C64,
    VKG_ST_DTYPE_COUNT
} vkg_st_dtype;

/* The file's name of dtype ("BF16") and its size in bytes; "?" and 0 for a value out of range. */
const char *vkg_st_dtype_name(vkg_st_dtype dtype);
size_t vkg_st_dtype_size(vkg_st_dtype dtype);

/* One tensor to write. Exactly one of data and f32 is set: data holds the numel elements already
 * in dtype (host byte order; bf16/f16 as uint16_t bit patterns), f32 holds numel fp32 values that
 * are converted to dtype on the way out (F32, BF16 and F16 only; both round to nearest even, NaN
 * stays NaN). numel is the product of shape[0..rank) (1 for rank 0, a scalar). */
typedef struct vkg_st_tensor {
    const char *name; /* valid UTF-8, unique, not "__metadata__" */
    vkg_st_dtype dtype;
    int rank;                       /* 0..VKG_ST_MAX_RANK */
    int64_t shape[VKG_ST_MAX_RANK]; /* row-major, each >= 0 */
    const void *data;
    const float *f32;
} vkg_st_tensor;

/* Write n tensors to a safetensors file at path, crash-safely (vkg_io_write_atomic): the header
 * lists them, and their data follows, in the order given (contiguous, little-endian); the header
 * is padded with spaces to a multiple of 8 bytes so the data starts 8-aligned. metadata_kv holds
 * n_meta key/value pairs (key0, value0, key1, value1, ...: UTF-8 strings, keys unique) written
 * as the header's "__metadata__" object (omitted when n_meta is 0). Nothing is kept. Errors:
 * VKG_ERR_INVALID_ARG naming the tensor or key (duplicate or reserved name, bad rank, dtype or
 * dimension, a size that overflows, data and f32 both or neither set, invalid UTF-8, a header
 * over VKG_ST_MAX_HEADER), VKG_ERR_NOMEM, VKG_ERR_IO naming the file. */
vkg_status vkg_safetensors_write(const char *path, const vkg_st_tensor *tensors, int n,
                                 const char *const *metadata_kv, int n_meta);

/* A tensor of an open safetensors file. */
typedef struct vkg_st_info {
    const char *name; /* owned by the file handle */
    vkg_st_dtype dtype;
    int rank;
    int64_t shape[VKG_ST_MAX_RANK];
    uint64_t numel;  /* elements (1 for a scalar, 0 when a dimension is 0) */
    uint64_t offset; /* where its data starts, in bytes from the start of the file */
    uint64_t nbytes; /* numel * vkg_st_dtype_size(dtype) */
} vkg_st_info;

typedef struct vkg_safetensors vkg_safetensors;

/* Open a safetensors file and validate all of its header before returning: a header size of at
 * most VKG_ST_MAX_HEADER bytes that fits the file, a header that is UTF-8 JSON (an object of
 * tensors and an optional "__metadata__" object of strings; unknown fields of a tensor are
 * skipped), a known dtype, a rank of at most VKG_ST_MAX_RANK, dimensions >= 0 whose product
 * does not overflow, data_offsets [begin, end] with end - begin = numel x dtype size, names
 * unique, and the tensors' byte ranges contiguous from 0, without overlap, covering the data to
 * the end of the file exactly. Only the header is read; memory grows with the header actually
 * present (its bytes, then a few times that for the parsed entries), never with the sizes it
 * declares. On success *out holds the file open until vkg_safetensors_close. Errors: VKG_ERR_IO
 * (cannot open, not a regular file), VKG_ERR_FORMAT naming the file and the tensor or field,
 * VKG_ERR_NOMEM. */
vkg_status vkg_safetensors_open(const char *path, vkg_safetensors **out);

/* Close the file and free the handle; NULL-safe, sets *ps = NULL. */
void vkg_safetensors_close(vkg_safetensors **ps);

/* The number of tensors, and tensor i (0 <= i < count) in the order of their data in the file;
 * the pointer lives as long as the handle. */
int vkg_safetensors_count(const vkg_safetensors *s);
const vkg_st_info *vkg_safetensors_info(const vkg_safetensors *s, int i);

/* The tensor called name, or NULL when the file has none. */
const vkg_st_info *vkg_safetensors_find(const vkg_safetensors *s, const char *name);

/* The "__metadata__" entries: their number, entry i's key and value (through key/value; entries
 * sorted by key; NULL for i out of range), and the value of key (NULL when absent). Strings live
 * as long as the handle. */
int vkg_safetensors_metadata_count(const vkg_safetensors *s);
void vkg_safetensors_metadata_at(const vkg_safetensors *s, int i, const char **key,
                                 const char **value);
const char *vkg_safetensors_metadata(const vkg_safetensors *s, const char *key);

/* Read the tensor called name into out (capacity floats; numel are written), converting F32,
 * BF16 and F16 to fp32 exactly. Errors: VKG_ERR_NOT_FOUND (no such tensor), VKG_ERR_UNSUPPORTED
 * (another dtype), VKG_ERR_INVALID_ARG (capacity < numel), VKG_ERR_FORMAT (the file shrank
 * since it was opened), VKG_ERR_IO; each names the file and the tensor. */
vkg_status vkg_safetensors_read_f32(vkg_safetensors *s, const char *name, float *out,
                                    size_t capacity);

/* Read the tensor called name as it is stored into out (capacity bytes; nbytes are written), in
 * host byte order (elements byte-swapped on a big-endian host). Errors as
 * vkg_safetensors_read_f32, without VKG_ERR_UNSUPPORTED. */
vkg_status vkg_safetensors_read_raw(vkg_safetensors *s, const char *name, void *out,
                                    size_t capacity);

/* A sharded model's index, model.safetensors.index.json: {"metadata": {...}, "weight_map":
 * {tensor name: shard file name, ...}}. Entries are sorted by tensor name. */
typedef struct vkg_st_index_entry {
    char *name; /* tensor */
    char *file; /* shard file name, in the index's folder */
} vkg_st_index_entry;

typedef struct vkg_st_index {
    int count;
    vkg_st_index_entry *entries;
} vkg_st_index;

/* Read an index file (at most VKG_ST_MAX_HEADER bytes). "metadata" and other top-level keys are
 * skipped. Shard names must be plain file names: empty names, names holding '/', '\\', ':' or
 * "..", and a tensor named twice are refused. Allocates idx's arrays (free with
 * vkg_safetensors_index_deinit). Errors: VKG_ERR_IO, VKG_ERR_FORMAT naming the file and the
 * tensor or field, VKG_ERR_NOMEM; on error *idx is left empty. */
vkg_status vkg_safetensors_index_read(const char *path, vkg_st_index *idx);

/* The shard file holding tensor name, or NULL when the index does not list it. */
const char *vkg_safetensors_index_lookup(const vkg_st_index *idx, const char *name);

/* Free idx's arrays and zero it. NULL-safe. */
void vkg_safetensors_index_deinit(vkg_st_index *idx);

/* ---- Hugging Face's config.json (hfconfig.c) ---------------------------------------------------
 * model_type "gpt2" (n_embd, n_layer, n_head, n_positions, n_inner, activation_function gelu_new,
 * layer_norm_epsilon, tie_word_embeddings) and the Llama family: "llama", "mistral", "qwen2"
 * (q, k and v biases), "qwen3" (QK-norm): hidden_size, intermediate_size, num_hidden_layers,
 * num_attention_heads, num_key_value_heads, head_dim, max_position_embeddings, vocab_size,
 * hidden_act silu, rms_norm_eps, rope_theta, rope_scaling null or "llama3",
 * tie_word_embeddings, with transformers' defaults for the fields a file leaves out. */

/* Parse config.json's text (n bytes; path names it in messages) into *cfg (padded vocabulary
 * computed). VKG_ERR_FORMAT naming the file and the field: malformed JSON, an unknown
 * model_type, a missing or out-of-range size, and what vkgpt does not compute (another
 * activation, sliding-window attention, a rope scaling other than Llama 3's, attention_bias or
 * mlp_bias true). Other fields are skipped. *cfg is untouched on error. */
vkg_status vkg_hf_config_parse(const char *text, size_t n, const char *path, vkg_model_config *cfg);
/* The same from the file at path (a regular file of at most 1 MiB). */
vkg_status vkg_hf_config_read(const char *path, vkg_model_config *cfg);
/* A model named on a command line: a preset (vkg_model_preset) or the path of a config.json.
 * VKG_ERR_NOT_FOUND naming the presets and what reading the path said when it is neither. */
vkg_status vkg_model_config_named(const char *name, vkg_model_config *cfg);
/* Write cfg as config.json (crash-safe, vkg_io_write_atomic) for its family: "gpt2", "llama",
 * "qwen2" or "qwen3", with the architectures entry transformers loads it by.
 * VKG_ERR_INVALID_ARG for an invalid config or one no family describes. */
vkg_status vkg_hf_config_write(const char *path, const vkg_model_config *cfg);

/* ---- a model as a Hugging Face directory (hfmodel.c) ------------------------------------------
 * DIR/config.json (vkg_hf_config_*) and DIR/model.safetensors, or a sharded model with
 * DIR/model.safetensors.index.json, with transformers' tensor names and layouts: GPT-2's
 * transformer.wte/wpe/h.N.{ln_1,attn.c_attn,attn.c_proj,ln_2,mlp.c_fc,mlp.c_proj}/ln_f, its Conv1D
 * weights stored (in, out); the Llama family's model.embed_tokens, model.layers.N.{
 * input_layernorm, self_attn.{q,k,v,o}_proj (biases for Qwen 2), self_attn.{q,k}_norm (Qwen 3),
 * post_attention_layernorm, mlp.{gate,up,down}_proj}, model.norm and lm_head when untied. The
 * vocabulary's padding rows are not in the file. */

/* Write cfg and params (vkg_model_num_params(cfg) floats, table order) into dir (created when
 * missing): config.json, then model.safetensors in fp32 or (bf16 1) bf16 rounded to nearest
 * even, each crash-safely. VKG_ERR_INVALID_ARG for a config no family describes. */
vkg_status vkg_hf_model_write(const char *dir, const vkg_model_config *cfg, const float *params,
                              int bf16);
/* Read the model in dir into *cfg and a new malloc'ed array *params (table order, padding rows
 * zero; F32, BF16 or F16 converted exactly). VKG_ERR_FORMAT naming the file and the tensor: one
 * the configuration needs that is missing, a wrong shape or an unsupported dtype; config.json's
 * and the safetensors readers' errors. Other tensors in the files are not read. On error
 * *params is NULL. */
vkg_status vkg_hf_model_read(const char *dir, vkg_model_config *cfg, float **params);

#ifdef __cplusplus
}
#endif
#endif
