/* Byte-pair encoding's tables and merge loop (see bpetab.h). */
#include "data/bpetab.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

struct vkg__merge_item {
    int32_t rank;
    int32_t left, right;       /* symbol slots */
    int32_t left_id, right_id; /* the ids the pair had when pushed (stale if they changed) */
};

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static uint64_t hash_pair(uint64_t key)
{
    key *= 0x9E3779B97F4A7C15ull;
    return key ^ (key >> 31);
}

/* The smallest power of two of at least 16 and twice count, less one; 0 when it would not fit. */
static size_t mask_for(size_t count)
{
    size_t c = 16;
    while (c < 2 * count && c <= SIZE_MAX / 4)
        c *= 2;
    return c < 2 * count ? 0 : c - 1;
}

vkg_status vkg__strtab_init(vkg__strtab *t, size_t count, const char *what)
{
    t->mask = mask_for(count);
    t->slot = t->mask ? malloc((t->mask + 1) * sizeof *t->slot) : NULL;
    VKG_CHECK(t->slot, VKG_ERR_NOMEM, "%s: out of memory for %zu tokens", what, count);
    memset(t->slot, 0xff, (t->mask + 1) * sizeof *t->slot);
    return VKG_OK;
}

int32_t vkg__strtab_find(const vkg__strtab *t, const char *bytes, const size_t *off, const char *s,
                         size_t n)
{
    for (size_t i = hash_bytes(s, n) & t->mask;; i = (i + 1) & t->mask) {
        int32_t id = t->slot[i];
        if (id < 0)
            return -1;
        if (off[id + 1] - off[id] == n && !memcmp(bytes + off[id], s, n))
            return id;
    }
}

void vkg__strtab_put(vkg__strtab *t, const char *s, size_t n, int32_t id)
{
    size_t i = hash_bytes(s, n) & t->mask;
    while (t->slot[i] >= 0)
        i = (i + 1) & t->mask;
    t->slot[i] = id;
}

void vkg__strtab_free(vkg__strtab *t)
{
    free(t->slot);
    t->slot = NULL;
}

vkg_status vkg__mergetab_init(vkg__mergetab *t, size_t count, const char *what)
{
    t->mask = mask_for(count);
    t->slot = t->mask ? malloc((t->mask + 1) * sizeof *t->slot) : NULL;
    VKG_CHECK(t->slot, VKG_ERR_NOMEM, "%s: out of memory for %zu merges", what, count);
    for (size_t i = 0; i <= t->mask; i++)
        t->slot[i].key = UINT64_MAX;
    return VKG_OK;
}

static uint64_t pair_key(int32_t left, int32_t right)
{
    return ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
}

const vkg__merge *vkg__mergetab_find(const vkg__mergetab *t, int32_t left, int32_t right)
{
    uint64_t key = pair_key(left, right);
    for (size_t i = hash_pair(key) & t->mask;; i = (i + 1) & t->mask) {
        if (t->slot[i].key == key)
            return &t->slot[i];
        if (t->slot[i].key == UINT64_MAX)
            return NULL;
    }
}

void vkg__mergetab_put(vkg__mergetab *t, int32_t left, int32_t right, int32_t rank, int32_t merged,
                       int later_wins)
{
    uint64_t key = pair_key(left, right);
    size_t i = hash_pair(key) & t->mask;
    while (t->slot[i].key != UINT64_MAX && t->slot[i].key != key)
        i = (i + 1) & t->mask;
    if (t->slot[i].key == UINT64_MAX || later_wins)
        t->slot[i] = (vkg__merge){key, rank, merged};
}

void vkg__mergetab_free(vkg__mergetab *t)
{
    free(t->slot);
    t->slot = NULL;
}

/* ---- the merge loop ------------------------------------------------------------------------- */

static int item_less(const vkg__merge_item *a, const vkg__merge_item *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(vkg__merger *m, vkg__merge_item it)
{
    size_t i = m->nheap++;
    while (i > 0 && item_less(&it, &m->heap[(i - 1) / 2])) {
        m->heap[i] = m->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    m->heap[i] = it;
}

static vkg__merge_item heap_pop(vkg__merger *m)
{
    vkg__merge_item top = m->heap[0], last = m->heap[--m->nheap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m->nheap)
            break;
        if (c + 1 < m->nheap && item_less(&m->heap[c + 1], &m->heap[c]))
            c++;
        if (!item_less(&m->heap[c], &last))
            break;
        m->heap[i] = m->heap[c];
        i = c;
    }
    if (m->nheap > 0)
        m->heap[i] = last;
    return top;
}

/* Push the pair (l, r) if it has a merge. */
static void consider(vkg__merger *m, const vkg__mergetab *t, int32_t l, int32_t r)
{
    if (l < 0 || r < 0)
        return;
    const vkg__merge *g = vkg__mergetab_find(t, m->id[l], m->id[r]);
    if (g)
        heap_push(m, (vkg__merge_item){g->rank, l, r, m->id[l], m->id[r]});
}

vkg_status vkg__merger_reserve(vkg__merger *m, size_t n)
{
    if (n <= m->cap)
        return VKG_OK;
    size_t cap = 64;
    while (cap < n)
        cap *= 2;
    int32_t *id = realloc(m->id, cap * sizeof *id);
    if (id)
        m->id = id;
    int32_t *nx = realloc(m->next, cap * sizeof *nx);
    if (nx)
        m->next = nx;
    int32_t *pv = realloc(m->prev, cap * sizeof *pv);
    if (pv)
        m->prev = pv;
    vkg__merge_item *hp = realloc(m->heap, 3 * cap * sizeof *hp); /* n-1 pushes + 2 a merge */
    if (hp)
        m->heap = hp;
    VKG_CHECK(id && nx && pv && hp, VKG_ERR_NOMEM, "out of memory encoding a %zu-symbol word", n);
    m->cap = cap;
    return VKG_OK;
}

vkg_status vkg__merger_run(vkg__merger *m, int32_t k, const vkg__mergetab *t, vkg_tokens *out)
{
    for (int32_t i = 0; i < k; i++) {
        m->next[i] = i + 1 < k ? i + 1 : -1;
        m->prev[i] = i - 1;
    }
    m->nheap = 0;
    for (int32_t i = 0; i + 1 < k; i++)
        consider(m, t, i, i + 1);
    while (m->nheap > 0) {
        vkg__merge_item it = heap_pop(m);
        int32_t l = it.left, r = it.right;
        if (m->id[l] != it.left_id || m->id[r] != it.right_id || m->next[l] != r)
            continue; /* stale: one side was merged since this pair was pushed */
        m->id[l] = vkg__mergetab_find(t, it.left_id, it.right_id)->merged;
        m->id[r] = -1;
        m->next[l] = m->next[r];
        if (m->next[r] >= 0)
            m->prev[m->next[r]] = l;
        consider(m, t, m->prev[l], l);
        consider(m, t, l, m->next[l]);
    }
    for (int32_t i = 0; k > 0 && i >= 0; i = m->next[i])
        VKG_TRY(vkg_tokens_push(out, m->id[i]));
    return VKG_OK;
}

void vkg__merger_free(vkg__merger *m)
{
    free(m->id), free(m->next), free(m->prev), free(m->heap);
    memset(m, 0, sizeof *m);
}
