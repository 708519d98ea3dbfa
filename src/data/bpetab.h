/* What byte-pair encoding needs whichever file a vocabulary comes from (GPT-2's encoder.json and
 * vocab.bpe, bpe.c; Hugging Face's tokenizer.json, hftok.c and hfenc.c): token ids keyed by their
 * strings, merges keyed by their pairs (both open addressing, sized at twice their entries), and
 * the merge of one word's symbols by rank: the adjacent pair with the lowest rank (leftmost on
 * ties) merged until no pair has one, with a heap and lazy invalidation, O(n log n) a word.
 * Merging the leftmost occurrence one at a time gives the merge-all-occurrences result because
 * a merge's product only takes part in merges of higher rank. Internal to src/data. */
#ifndef VKG_DATA_BPETAB_H
#define VKG_DATA_BPETAB_H

#include <stddef.h>
#include <stdint.h>

#include "vkgpt/status.h"
#include "vkgpt/tokenizer.h"

/* Ids keyed by their strings; the strings are the caller's: id's is bytes[off[id], off[id + 1]). */
typedef struct vkg__strtab {
    int32_t *slot; /* -1: empty */
    size_t mask;
} vkg__strtab;

/* Room for count ids. VKG_ERR_NOMEM (what names the caller's file). */
vkg_status vkg__strtab_init(vkg__strtab *t, size_t count, const char *what);
/* The id whose string is s (n bytes), or -1. */
int32_t vkg__strtab_find(const vkg__strtab *t, const char *bytes, const size_t *off, const char *s,
                         size_t n);
/* Add id under s (n bytes), which the table must not hold yet (find it first). */
void vkg__strtab_put(vkg__strtab *t, const char *s, size_t n, int32_t id);
void vkg__strtab_free(vkg__strtab *t);

typedef struct vkg__merge {
    uint64_t key; /* (left << 32) | right; UINT64_MAX when empty */
    int32_t rank, merged;
} vkg__merge;

typedef struct vkg__mergetab {
    vkg__merge *slot;
    size_t mask;
} vkg__mergetab;

/* Room for count merges. VKG_ERR_NOMEM naming what. */
vkg_status vkg__mergetab_init(vkg__mergetab *t, size_t count, const char *what);
/* The merge of (left, right), or NULL. */
const vkg__merge *vkg__mergetab_find(const vkg__mergetab *t, int32_t left, int32_t right);
/* Add a merge. A pair given again keeps the later rank when later_wins (GPT-2's vocab.bpe read
 * into a Python dict), else its first (tokenizers). */
void vkg__mergetab_put(vkg__mergetab *t, int32_t left, int32_t right, int32_t rank, int32_t merged,
                       int later_wins);
void vkg__mergetab_free(vkg__mergetab *t);

typedef struct vkg__merge_item vkg__merge_item;

/* Scratch of the merge loop, kept across words (zero-initialised; vkg__merger_free releases). */
typedef struct vkg__merger {
    int32_t *id; /* the word's symbols: the caller fills id[0, k) after vkg__merger_reserve */
    int32_t *next, *prev;
    vkg__merge_item *heap;
    size_t cap, nheap;
} vkg__merger;

/* Room for a word of n symbols. VKG_ERR_NOMEM. */
vkg_status vkg__merger_reserve(vkg__merger *m, size_t n);
/* Merge id[0, k) by t's ranks and append the resulting ids to out. */
vkg_status vkg__merger_run(vkg__merger *m, int32_t k, const vkg__mergetab *t, vkg_tokens *out);
void vkg__merger_free(vkg__merger *m);

#endif
