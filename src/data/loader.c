/* The training data loader (vkgpt/data.h): llm.c's sequential batch order over shards and text,
 * an optional seeded per-epoch permutation of global batches, a rank's slice of each global
 * batch, and a position that can be saved and restored. Sources are token shards (read with
 * pread, never loaded whole) and in-memory encodings of runs of text files. Loading asks the
 * config's cancellation between files and chunks. No threads, no prefetching, no printing. */
#include "vkgpt/data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "data/tokenizer_internal.h"
#include "io/io_internal.h"
#include "os/file.h"
#include "os/glob.h"
#include "vkgpt/io.h"

#define SCAN_CHUNK 65536

typedef struct source {
    char *name;    /* file name (first file of a text run) */
    int fd;        /* shard: open file; -1 for text */
    uint16_t *mem; /* text: the tokens; NULL for shards */
    uint64_t ntok;
    uint64_t nbatches; /* global batches in this source */
    uint64_t first;    /* global index of its first batch */
} source;

struct vkg_data {
    uint64_t B, T, W, rank, bt;
    int vocab;
    int shuffle, scan;
    uint64_t seed;
    source *src;
    size_t nsrc, nfiles;
    uint64_t nbatches, ntokens;
    uint64_t checksum;     /* of every token in order (token counts only without the scan) */
    uint64_t epoch, batch; /* position */
    uint64_t *perm;        /* batch order of perm_epoch when shuffling */
    uint64_t perm_epoch;
    int perm_valid;
    uint16_t *buf;            /* (B*T + 1) */
    const vkg_cancel *cancel; /* the config's, during vkg_data_create only */
};

vkg_data_config vkg_data_config_default(void)
{
    vkg_data_config c = {0};
    c.batch_size = 4;
    c.seq_len = 64;
    c.vocab_size = 50257;
    c.world_size = 1;
    c.scan_tokens = 1;
    return c;
}

/* ---- helpers -------------------------------------------------------------------------------- */

static vkg_status pread_exact(int fd, const char *name, void *buf, size_t n, uint64_t off)
{
    char *p = buf;
    while (n > 0) {
        long long got = vkg_os_pread(fd, p, n, off);
        VKG_CHECK(got >= 0, VKG_ERR_IO, "%s: read failed: %s", name, strerror(errno));
        VKG_CHECK(got > 0, VKG_ERR_FORMAT, "%s: file ended early at byte %llu (shrunk on disk?)",
                  name, (unsigned long long)off);
        p += got;
        n -= (size_t)got;
        off += (uint64_t)got;
    }
    return VKG_OK;
}

static void le16_to_host(uint16_t *x, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (size_t i = 0; i < n; i++)
        x[i] = (uint16_t)((x[i] >> 8) | (x[i] << 8));
#else
    (void)x;
    (void)n;
#endif
}

/* FNV-1a over 16-bit values: the data's checksum (identical data gives identical sums on any
 * host; it detects a different or differently ordered file, it is not a cryptographic hash). */
static uint64_t mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x100000001b3ull;
}

/* The first token >= vocab among n tokens whose first is at position `start`, as an error. With
 * sum, adds the tokens to that checksum. */
static vkg_status check_tokens(const vkg_data_t *d, const char *name, const uint16_t *t, size_t n,
                               uint64_t start, uint64_t *sum)
{
    uint64_t h = sum ? *sum : 0;
    for (size_t i = 0; i < n; i++) {
        VKG_CHECK(t[i] < d->vocab, VKG_ERR_FORMAT,
                  "%s: token %u at position %llu is not below the vocabulary size %d", name,
                  (unsigned)t[i], (unsigned long long)(start + i), d->vocab);
        h = mix(h, t[i]);
    }
    if (sum)
        *sum = h;
    return VKG_OK;
}

/* VKG_ERR_ABORTED naming the file when the config's cancellation says stop. */
static vkg_status check_cancel(const vkg_data_t *d, const char *name)
{
    const vkg_cancel *c = d->cancel;
    VKG_CHECK(!c || !c->fn || !c->fn(c->ctx), VKG_ERR_ABORTED, "interrupted while loading %s",
              name);
    return VKG_OK;
}

static int is_shard_name(const char *name)
{
    size_t n = strlen(name);
    return n >= 4 && !strcmp(name + n - 4, ".bin");
}

static vkg_status add_source(vkg_data_t *d, const char *name, size_t *cap)
{
    if (d->nsrc == *cap) {
        size_t nc = *cap ? 2 * *cap : 8;
        source *ns = realloc(d->src, nc * sizeof *ns);
        VKG_CHECK(ns, VKG_ERR_NOMEM, "out of memory");
        d->src = ns;
        *cap = nc;
    }
    source *s = &d->src[d->nsrc];
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->name = strdup(name);
    VKG_CHECK(s->name, VKG_ERR_NOMEM, "out of memory");
    d->nsrc++;
    return VKG_OK;
}

/* ---- opening sources ------------------------------------------------------------------------ */

static vkg_status open_shard(vkg_data_t *d, source *s)
{
    size_t ntok = 0;
    uint64_t size = 0;
    VKG_TRY(vkg_shard_read_header(s->name, &ntok));
    s->ntok = ntok;
    VKG_TRY(vkg__io_open_fd(s->name, &s->fd, &size));
    if (!d->scan)
        return VKG_OK;
    uint16_t *chunk = malloc(SCAN_CHUNK * sizeof *chunk);
    VKG_CHECK(chunk, VKG_ERR_NOMEM, "out of memory");
    vkg_status st = VKG_OK;
    for (uint64_t at = 0; at < s->ntok && st == VKG_OK; at += SCAN_CHUNK) {
        size_t m = s->ntok - at < SCAN_CHUNK ? (size_t)(s->ntok - at) : SCAN_CHUNK;
        st = check_cancel(d, s->name);
        if (st == VKG_OK)
            st = pread_exact(s->fd, s->name, chunk, 2 * m, VKG_FILE_HEADER_BYTES + 2 * at);
        if (st == VKG_OK) {
            le16_to_host(chunk, m);
            st = check_tokens(d, s->name, chunk, m, at, &d->checksum);
        }
    }
    free(chunk);
    return st;
}

/* Encode one text file (preceded by end-of-text) and append it to the text source s. */
static vkg_status add_text(vkg_data_t *d, source *s, const char *path, const vkg_tokenizer_t *tok)
{
    VKG_CHECK(tok, VKG_ERR_INVALID_ARG,
              "%s: not a .bin token shard, and no tokenizer was given to read it as text", path);
    char *text = NULL;
    size_t n = 0;
    vkg_tokens ids = {0};
    VKG_TRY(vkg_text_read(path, d->cancel, &text, &n));
    vkg_status st = vkg_tokens_push(&ids, vkg_tokenizer_eot(tok));
    if (st == VKG_OK)
        st = vkg__tokenizer_encode(tok, text, n, d->cancel, &ids);
    if (st == VKG_ERR_ABORTED)
        st = VKG_FAIL(VKG_ERR_ABORTED, "interrupted while loading %s", path);
    free(text);
    uint16_t *mem = st == VKG_OK ? realloc(s->mem, (s->ntok + ids.n) * sizeof *mem) : NULL;
    if (st == VKG_OK && !mem)
        st = VKG_FAIL(VKG_ERR_NOMEM, "%s: out of memory for %zu tokens", path, ids.n);
    for (size_t i = 0; st == VKG_OK && i < ids.n; i++) {
        VKG_CHECK_GOTO(st, ids.ids[i] >= 0 && ids.ids[i] < d->vocab && ids.ids[i] <= UINT16_MAX,
                       VKG_ERR_FORMAT, done,
                       "%s: token %ld at position %zu (of its encoding) is not below the "
                       "vocabulary size %d",
                       path, (long)ids.ids[i], i, d->vocab);
        mem[s->ntok + i] = (uint16_t)ids.ids[i];
        d->checksum = mix(d->checksum, mem[s->ntok + i]);
    }
done:
    if (mem) {
        s->mem = mem;
        if (st == VKG_OK)
            s->ntok += ids.n;
    }
    vkg_tokens_deinit(&ids);
    return st;
}

vkg_status vkg_data_check_path(const char *pattern)
{
    vkg_os_paths g;
    VKG_CHECK(pattern && pattern[0], VKG_ERR_INVALID_ARG, "no data path given");
    int rc = vkg_os_glob(pattern, &g);
    vkg_os_paths_free(&g);
    VKG_CHECK(rc != VKG_OS_GLOB_NOMATCH, VKG_ERR_NOT_FOUND, "no file matches '%s'", pattern);
    VKG_CHECK(rc != VKG_OS_GLOB_NOMEM, VKG_ERR_NOMEM, "no memory to expand '%s'", pattern);
    VKG_CHECK(rc == VKG_OS_GLOB_OK, VKG_ERR_IO, "cannot expand '%s'", pattern);
    return VKG_OK;
}

/* Glob the pattern and build the sources, in name order. */
static vkg_status open_sources(vkg_data_t *d, const vkg_data_config *cfg)
{
    vkg_os_paths g;
    size_t cap = 0;
    int rc = vkg_os_glob(cfg->path, &g);
    if (rc == VKG_OS_GLOB_NOMATCH && !vkg_os_glob_has_wildcard(cfg->path))
        return VKG_FAIL(VKG_ERR_NOT_FOUND, "%s: no such file", cfg->path);
    if (rc == VKG_OS_GLOB_NOMATCH)
        return VKG_FAIL(VKG_ERR_NOT_FOUND, "no file matches '%s'", cfg->path);
    VKG_CHECK(rc != VKG_OS_GLOB_NOMEM, VKG_ERR_NOMEM, "no memory to expand '%s'", cfg->path);
    VKG_CHECK(rc == VKG_OS_GLOB_OK, VKG_ERR_IO, "cannot expand '%s'", cfg->path);
    vkg_status st = VKG_OK;
    int in_text = 0;
    for (size_t i = 0; i < g.n && st == VKG_OK; i++) {
        const char *name = g.v[i];
        int shard = is_shard_name(name);
        st = check_cancel(d, name);
        if (st == VKG_OK && (shard || !in_text))
            st = add_source(d, name, &cap);
        in_text = !shard;
        if (st == VKG_OK)
            st = shard ? open_shard(d, &d->src[d->nsrc - 1])
                       : add_text(d, &d->src[d->nsrc - 1], name, cfg->tokenizer);
    }
    d->nfiles = g.n;
    vkg_os_paths_free(&g);
    return st;
}

/* Count global batches per source; refuse sources shorter than one. */
static vkg_status layout(vkg_data_t *d)
{
    uint64_t global = d->bt * d->W;
    for (size_t i = 0; i < d->nsrc; i++) {
        source *s = &d->src[i];
        s->nbatches = s->ntok > 0 ? (s->ntok - 1) / global : 0;
        VKG_CHECK(s->nbatches > 0, VKG_ERR_FORMAT,
                  "%s%s: holds %llu tokens, but one global batch needs B*T*W + 1 = %llu "
                  "(B=%llu T=%llu W=%llu)",
                  s->name, s->mem ? " (text)" : "", (unsigned long long)s->ntok,
                  (unsigned long long)(global + 1), (unsigned long long)d->B,
                  (unsigned long long)d->T, (unsigned long long)d->W);
        s->first = d->nbatches;
        d->nbatches += s->nbatches;
        d->ntokens += s->ntok;
        d->checksum = mix(d->checksum, s->ntok);
    }
    return VKG_OK;
}

vkg_status vkg_data_create(const vkg_data_config *cfg, vkg_data_t **out)
{
    *out = NULL;
    VKG_CHECK(cfg->path && cfg->path[0], VKG_ERR_INVALID_ARG, "no data path given");
    VKG_CHECK(cfg->batch_size > 0 && cfg->seq_len > 0, VKG_ERR_INVALID_ARG,
              "batch size (%d) and sequence length (%d) must be positive", cfg->batch_size,
              cfg->seq_len);
    VKG_CHECK(cfg->world_size > 0 && cfg->rank >= 0 && cfg->rank < cfg->world_size,
              VKG_ERR_INVALID_ARG, "rank %d is not in [0, world size %d)", cfg->rank,
              cfg->world_size);
    VKG_CHECK(cfg->vocab_size > 0 && cfg->vocab_size <= 65536, VKG_ERR_INVALID_ARG,
              "vocabulary size %d is not in [1, 65536] (shards hold uint16 tokens)",
              cfg->vocab_size);
    vkg_data_t *d = calloc(1, sizeof *d);
    VKG_CHECK(d, VKG_ERR_NOMEM, "out of memory");
    d->B = (uint64_t)cfg->batch_size;
    d->T = (uint64_t)cfg->seq_len;
    d->W = (uint64_t)cfg->world_size;
    d->rank = (uint64_t)cfg->rank;
    d->bt = d->B * d->T;
    d->vocab = cfg->vocab_size;
    d->shuffle = cfg->shuffle != 0;
    d->seed = d->shuffle ? cfg->seed : 0;
    d->scan = cfg->scan_tokens;
    d->checksum = 0xcbf29ce484222325ull;
    vkg_status st;
    d->buf = malloc((d->bt + 1) * sizeof *d->buf);
    VKG_CHECK_GOTO(st, d->buf, VKG_ERR_NOMEM, fail, "out of memory for a batch of %llu tokens",
                   (unsigned long long)d->bt);
    d->cancel = &cfg->cancel;
    VKG_TRY_GOTO(st, open_sources(d, cfg), fail);
    VKG_TRY_GOTO(st, layout(d), fail);
    d->cancel = NULL;
    *out = d;
    return VKG_OK;
fail:
    vkg_data_destroy(&d);
    return st;
}

void vkg_data_destroy(vkg_data_t **pd)
{
    if (!pd || !*pd)
        return;
    vkg_data_t *d = *pd;
    for (size_t i = 0; i < d->nsrc; i++) {
        if (d->src[i].fd >= 0)
            vkg_os_close(d->src[i].fd);
        free(d->src[i].mem);
        free(d->src[i].name);
    }
    free(d->src);
    free(d->perm);
    free(d->buf);
    free(d);
    *pd = NULL;
}

/* ---- reading -------------------------------------------------------------------------------- */

vkg_status vkg_data_read_batch(vkg_data_t *d, uint64_t g, int32_t *inputs, int32_t *targets)
{
    VKG_CHECK(g < d->nbatches, VKG_ERR_INVALID_ARG, "batch %llu is past the last batch %llu",
              (unsigned long long)g, (unsigned long long)d->nbatches);
    size_t lo = 0, hi = d->nsrc - 1; /* the source holding g: last with first <= g */
    while (lo < hi) {
        size_t mid = (lo + hi + 1) / 2;
        if (d->src[mid].first <= g)
            lo = mid;
        else
            hi = mid - 1;
    }
    const source *s = &d->src[lo];
    uint64_t start = (g - s->first) * d->bt * d->W + d->rank * d->bt, n = d->bt + 1;
    if (s->mem) {
        memcpy(d->buf, s->mem + start, n * sizeof *d->buf);
    } else {
        VKG_TRY(pread_exact(s->fd, s->name, d->buf, n * sizeof *d->buf,
                            VKG_FILE_HEADER_BYTES + 2 * start));
        le16_to_host(d->buf, n);
    }
    VKG_TRY(check_tokens(d, s->name, d->buf, n, start, NULL));
    for (uint64_t i = 0; i < d->bt; i++) {
        inputs[i] = d->buf[i];
        targets[i] = d->buf[i + 1];
    }
    return VKG_OK;
}

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Make d->perm the batch order of `epoch`: a Fisher-Yates shuffle driven by (seed, epoch). */
static vkg_status make_perm(vkg_data_t *d, uint64_t epoch)
{
    if (d->perm_valid && d->perm_epoch == epoch)
        return VKG_OK;
    if (!d->perm) {
        d->perm = malloc(d->nbatches * sizeof *d->perm);
        VKG_CHECK(d->perm, VKG_ERR_NOMEM, "out of memory for the order of %llu batches",
                  (unsigned long long)d->nbatches);
    }
    uint64_t state = d->seed ^ (epoch * 0xD1B54A32D192ED03ull);
    state = splitmix64(&state);
    for (uint64_t i = 0; i < d->nbatches; i++)
        d->perm[i] = i;
    for (uint64_t i = d->nbatches - 1; i > 0; i--) {
        uint64_t bound = i + 1, limit = UINT64_MAX - UINT64_MAX % bound, r;
        do
            r = splitmix64(&state);
        while (r >= limit);
        uint64_t j = r % bound, t = d->perm[i];
        d->perm[i] = d->perm[j];
        d->perm[j] = t;
    }
    d->perm_epoch = epoch;
    d->perm_valid = 1;
    return VKG_OK;
}

vkg_status vkg_data_next(vkg_data_t *d, int32_t *inputs, int32_t *targets)
{
    uint64_t epoch = d->epoch, batch = d->batch;
    if (batch == d->nbatches) {
        epoch++;
        batch = 0;
    }
    uint64_t g = batch;
    if (d->shuffle) {
        VKG_TRY(make_perm(d, epoch));
        g = d->perm[batch];
    }
    VKG_TRY(vkg_data_read_batch(d, g, inputs, targets));
    d->epoch = epoch;
    d->batch = batch + 1;
    return VKG_OK;
}

/* ---- position ------------------------------------------------------------------------------- */

void vkg_data_position(const vkg_data_t *d, vkg_data_pos *pos)
{
    pos->epoch = d->epoch;
    pos->batch = d->batch;
    pos->num_batches = d->nbatches;
    pos->shuffle = (uint64_t)d->shuffle;
    pos->seed = d->seed;
}

vkg_status vkg_data_seek(vkg_data_t *d, const vkg_data_pos *pos)
{
    VKG_CHECK(pos->num_batches == d->nbatches, VKG_ERR_MISMATCH,
              "saved data position is for %llu batches per epoch, but this data has %llu "
              "(different files, batch size, sequence length or world size?)",
              (unsigned long long)pos->num_batches, (unsigned long long)d->nbatches);
    VKG_CHECK(pos->shuffle == (uint64_t)d->shuffle, VKG_ERR_MISMATCH,
              "saved data position was taken with shuffle %s, the loader has it %s",
              pos->shuffle ? "on" : "off", d->shuffle ? "on" : "off");
    VKG_CHECK(pos->seed == d->seed, VKG_ERR_MISMATCH,
              "saved data position was taken with shuffle seed %llu, the loader has %llu",
              (unsigned long long)pos->seed, (unsigned long long)d->seed);
    VKG_CHECK(pos->batch <= d->nbatches, VKG_ERR_INVALID_ARG,
              "saved data position batch %llu is past the %llu batches of an epoch",
              (unsigned long long)pos->batch, (unsigned long long)d->nbatches);
    d->epoch = pos->epoch;
    d->batch = pos->batch;
    return VKG_OK;
}

void vkg_data_reset(vkg_data_t *d)
{
    d->epoch = 0;
    d->batch = 0;
}

uint64_t vkg_data_num_batches(const vkg_data_t *d)
{
    return d->nbatches;
}

uint64_t vkg_data_num_tokens(const vkg_data_t *d)
{
    return d->ntokens;
}

size_t vkg_data_num_files(const vkg_data_t *d)
{
    return d->nfiles;
}

uint64_t vkg_data_checksum(const vkg_data_t *d)
{
    return d->checksum;
}
