/* Internals shared by the llm.c file readers in src/io: opening a file with its size and checking
 * the 256-int32 header. Not part of the public API. */
#ifndef VKG_IO_INTERNAL_H
#define VKG_IO_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "vkgpt/io.h"

/* Open path read-only as a regular file and report its size in bytes. A FIFO, device, socket or
 * directory is refused (VKG_ERR_IO naming the file and what it is) without blocking and without
 * reading from it: such a file may never end. VKG_ERR_IO also when it cannot be opened. On
 * success the caller closes *fd. */
vkg_status vkg__io_open_fd(const char *path, int *fd, uint64_t *size);

/* vkg__io_open_fd as a stdio stream for binary reading; the caller closes *f. */
vkg_status vkg__io_open(const char *path, FILE **f, uint64_t *size);

/* Read the 1024-byte header from the start of f into hdr (host order) and check hdr[0] == magic.
 * kind ("model", "token shard", ...) is used in messages. VKG_ERR_FORMAT naming the file when the
 * file is shorter than a header or the magic differs. */
vkg_status vkg__io_read_header(FILE *f, const char *path, uint64_t size, int32_t magic,
                               const char *kind, int32_t hdr[VKG_FILE_HEADER_INTS]);

/* Check that a file of `size` bytes holds exactly `expected` bytes; VKG_ERR_FORMAT otherwise,
 * saying how many bytes are missing or extra and what the header declared (`what`). */
vkg_status vkg__io_check_size(const char *path, uint64_t size, uint64_t expected, const char *what);

/* The parsers behind vkg_modelfile_read, vkg_shard_read and vkg_tokfile_read, on an open stream
 * f of `size` bytes positioned at its start (a file, or an fmemopen buffer for the fuzz targets);
 * path names it in messages. Results, ownership and errors as the path functions; the caller
 * closes f. */
vkg_status vkg__modelfile_read_stream(FILE *f, const char *path, uint64_t size,
                                      vkg_model_config *cfg, float **params);
vkg_status vkg__shard_read_stream(FILE *f, const char *path, uint64_t size, uint16_t **tokens,
                                  size_t *ntok);
vkg_status vkg__tokfile_read_stream(FILE *f, const char *path, uint64_t size, vkg_tokfile *tf);

/* 1 when the n bytes at s are valid UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF), as the safetensors library requires of a header; 0 otherwise. */
int vkg__utf8_valid(const char *s, size_t n);

/* vkg_safetensors_open on the size bytes at data (kept, not copied: they must outlive the
 * handle); name labels messages. For the fuzz targets. */
vkg_status vkg__safetensors_open_mem(const void *data, size_t size, const char *name,
                                     vkg_safetensors **out);

/* vkg_safetensors_index_read on the n bytes of text; path labels messages. */
vkg_status vkg__safetensors_index_parse(const char *text, size_t n, const char *path,
                                        vkg_st_index *idx);

#endif
