/* Training data: batches of (inputs, targets) read from llm.c token shards or text files.
 *
 * Sources. `path` is a file or a glob(3) pattern, matches sorted by name. A name ending in ".bin"
 * must be an llm.c token shard (header and exact size checked when the loader is created); any
 * other file is UTF-8 text, tokenized into memory with the given tokenizer when the loader is
 * created, each file preceded by the end-of-text token. Consecutive text files in the sorted list
 * form one source; each shard is a source of its own. Every token must be < vocab_size: the first
 * one that is not is refused with the file and its position (counted in tokens from the start of
 * the shard's token data, or of the text file's encoding including its leading end-of-text).
 *
 * Order (as llm.c's DataLoader). A global batch is B*T*W tokens (W = world size) plus the one
 * target token after them; rank r of W reads the slice of B*T (+1) tokens at offset r*B*T of each
 * global batch, so ranks are disjoint and together cover the global batch. Global batches never
 * span two sources: a source of n tokens holds floor((n - 1) / (B*T*W)) of them, global batch k of
 * a source covering its tokens [k*B*T*W, (k+1)*B*T*W + 1); tokens after a source's last full batch
 * are never read. Sources follow one another in order; after the last batch of the last source the
 * loader wraps to the first batch of the first source and an epoch ends. With one source and W = 1
 * this is exactly llm.c's batch i = tokens [i*B*T, i*B*T + B*T + 1). A source too short for one
 * global batch is refused (as llm.c refuses it).
 *
 * Shuffling (optional) permutes the order of the global batches (across all sources) anew each
 * epoch, from the seed and the epoch number alone, so every rank with the same seed sees the same
 * order and a restored position continues exactly. Batch contents are never shuffled.
 *
 * Input. Only regular files are read: a FIFO, device, socket or directory is refused, naming it,
 * without reading from it (it may never end). Text is text: a NUL byte anywhere is refused as
 * binary data (vkg_text_check, the rule `vkgpt prepare` applies too). Loading can be cancelled
 * (vkg_cancel, checked between chunks of reading, scanning and tokenizing).
 *
 * The loader keeps file descriptors of its shards open and reads each batch with pread; it does
 * not prefetch and is not thread-safe (one loader per rank).
 */
#ifndef VKGPT_DATA_H
#define VKGPT_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "vkgpt/status.h"
#include "vkgpt/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A cancellation check for long loads: fn(ctx) returns nonzero to stop. It is called often from
 * the loading thread, so it must be cheap (reading a flag a signal handler sets, for instance).
 * fn NULL: never cancelled. */
typedef struct vkg_cancel {
    int (*fn)(void *ctx);
    void *ctx;
} vkg_cancel;

typedef struct vkg_data_config {
    const char *path;                 /* file or glob pattern */
    int batch_size;                   /* B */
    int seq_len;                      /* T */
    int vocab_size;                   /* tokens >= this are refused */
    int rank;                         /* 0 <= rank < world_size */
    int world_size;                   /* W */
    int shuffle;                      /* 0: sequential; 1: seeded batch order per epoch */
    uint64_t seed;                    /* shuffle seed */
    int scan_tokens;                  /* 1: check every token of every shard at create (default);
                                         0: only the tokens of each batch as it is read */
    const vkg_tokenizer_t *tokenizer; /* encodes text files; may be NULL for shards only; used
                                         only during vkg_data_create */
    vkg_cancel cancel;                /* checked while vkg_data_create loads; fn NULL: never */
} vkg_data_config;

/* The loader's position: a plain struct a checkpoint can store field by field. */
typedef struct vkg_data_pos {
    uint64_t epoch;       /* completed passes over the data */
    uint64_t batch;       /* index, within the epoch, of the next global batch to read */
    uint64_t num_batches; /* global batches per epoch (checked when restoring) */
    uint64_t shuffle;     /* 0 or 1 (checked when restoring) */
    uint64_t seed;        /* shuffle seed, 0 when not shuffling (checked when restoring) */
} vkg_data_pos;

typedef struct vkg_data vkg_data_t;

/* Defaults: no path, B = 4, T = 64, vocab 50257, rank 0 of 1, no shuffle, seed 0, scan on, no
 * cancellation. */
vkg_data_config vkg_data_config_default(void);

/* VKG_OK when pattern (a file name or a glob, as vkg_data_config.path) names at least one
 * existing file; VKG_ERR_NOT_FOUND "no file matches 'PATTERN'" otherwise, VKG_ERR_IO when the
 * pattern cannot be expanded. Opens and reads nothing: a cheap check before slower work. */
vkg_status vkg_data_check_path(const char *pattern);

/* Open every matching file, check headers and tokens, tokenize text, and position the loader at
 * epoch 0, batch 0. Errors: VKG_ERR_INVALID_ARG (bad B, T, rank, world size, vocab, or text
 * without a tokenizer), VKG_ERR_NOT_FOUND (no file matches), VKG_ERR_IO / VKG_ERR_FORMAT naming
 * the file (bad header or size, token >= vocab with its position, a source too short for one
 * batch, a file that is not a regular file, binary data given as text), VKG_ERR_ABORTED
 * ("interrupted while loading FILE") when cfg->cancel said stop. The config's strings and
 * tokenizer are not kept. */
vkg_status vkg_data_create(const vkg_data_config *cfg, vkg_data_t **out);

/* Close files, free memory, set *d = NULL. NULL-safe. */
void vkg_data_destroy(vkg_data_t **d);

/* Read this rank's slice of the next global batch: inputs and targets (B,T) each, targets being
 * the inputs shifted by one token. Advances the position (wrapping at the end of an epoch).
 * Errors: VKG_ERR_IO, VKG_ERR_FORMAT (a token >= vocab, when scan_tokens was 0); the position
 * does not advance on error. */
vkg_status vkg_data_next(vkg_data_t *d, int32_t *inputs, int32_t *targets);

/* Read this rank's slice of global batch g (0 <= g < num_batches, in sequential order, ignoring
 * shuffling and the position, which is unchanged). */
vkg_status vkg_data_read_batch(vkg_data_t *d, uint64_t g, int32_t *inputs, int32_t *targets);

/* The current position. */
void vkg_data_position(const vkg_data_t *d, vkg_data_pos *pos);

/* Continue from pos (as returned by vkg_data_position of a loader over the same data with the
 * same B, T, W, shuffle and seed): the following vkg_data_next calls return exactly the batches
 * that loader would have returned next. VKG_ERR_MISMATCH naming the field when pos belongs to a
 * different configuration; VKG_ERR_INVALID_ARG when batch > num_batches. */
vkg_status vkg_data_seek(vkg_data_t *d, const vkg_data_pos *pos);

/* Back to epoch 0, batch 0 (for evaluation passes). */
void vkg_data_reset(vkg_data_t *d);

/* Global batches per epoch, tokens over all sources, and matched files. */
uint64_t vkg_data_num_batches(const vkg_data_t *d);
uint64_t vkg_data_num_tokens(const vkg_data_t *d);
size_t vkg_data_num_files(const vkg_data_t *d);
/* A 64-bit checksum of every token in order and of each file's token count (with scan_tokens
 * off, of the token counts only): equal data gives equal checksums on any host, so data-parallel
 * ranks can check that they read the same data. Not a cryptographic hash. */
uint64_t vkg_data_checksum(const vkg_data_t *d);

/* Text input, shared by the loader and `vkgpt prepare`. */

/* The rule every text input meets: no NUL byte (a NUL means binary data, such as a token shard,
 * an archive or an executable, given as text). VKG_ERR_FORMAT naming `name` and the offset of the
 * first NUL otherwise. */
vkg_status vkg_text_check(const char *name, const char *text, size_t n);

/* Read the whole of the regular file `path` as text: a FIFO, device, socket or directory is
 * refused without reading (VKG_ERR_IO naming it); the text is checked as it is read (VKG_ERR_FORMAT
 * as vkg_text_check, at the first NUL, so binary data is not read to its end); cancel (may be
 * NULL) is checked between chunks (VKG_ERR_ABORTED, "interrupted while loading PATH"). Never reads
 * more than the size the file had when opened. On success *text is malloc'ed (NUL-terminated;
 * the caller frees it) and *n is its length. */
vkg_status vkg_text_read(const char *path, const vkg_cancel *cancel, char **text, size_t *n);

#ifdef __cplusplus
}
#endif
#endif
