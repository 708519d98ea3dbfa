/* llm.c-compatible files and crash-safe writing.
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

#ifdef __cplusplus
}
#endif
#endif
