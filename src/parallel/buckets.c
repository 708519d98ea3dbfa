/* Gradient buckets: the grouping policy over a model part's gradient units and the packing of a
 * bucket's ranges between the host's view of the gradients and one contiguous buffer (or, with
 * a packed tensor, the same packing done by the device's copies). A bucket's
 * ranges are packed in ascending order of offset (neighbours merged), so that any cut of the
 * gradient tensor into consecutive slices (ZeRO-1's shards) cuts each packed bucket into
 * consecutive slices too. */
#include "parallel/buckets.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* Ranges by offset. */
static int by_offset(const void *a, const void *b)
{
    const size_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sort ranges[0, n) by offset and merge those that touch; returns the new count. */
static int sort_merge(size_t (*ranges)[2], int n)
{
    qsort(ranges, (size_t)n, sizeof *ranges, by_offset);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0 && ranges[m - 1][0] + ranges[m - 1][1] == ranges[i][0])
            ranges[m - 1][1] += ranges[i][1];
        else
            ranges[m][0] = ranges[i][0], ranges[m++][1] = ranges[i][1];
    }
    return m;
}

struct vkg_buckets {
    vkg_model *model;
    int n;               /* buckets */
    int *first_range;    /* (n + 1) index into ranges */
    size_t (*ranges)[2]; /* (offset, count) in floats */
};

void vkg_buckets_destroy(vkg_buckets **pb)
{
    vkg_buckets *b = pb ? *pb : NULL;
    if (!b)
        return;
    free(b->first_range), free(b->ranges);
    free(b);
    *pb = NULL;
}

vkg_status vkg_buckets_create(vkg_model *m, int slot, size_t bucket_bytes, const vkg_tensor *packed,
                              vkg_buckets **out)
{
    int units = vkg_model_unit_count(m);
    vkg_buckets *b = calloc(1, sizeof *b);
    int *last = malloc((size_t)units * sizeof *last);
    vkg_status st = VKG_OK;
    VKG_CHECK_GOTO(st, b && last, VKG_ERR_NOMEM, fail, "no memory for gradient buckets");
    b->model = m;
    b->first_range = malloc((size_t)(units + 1) * sizeof *b->first_range);
    b->ranges = malloc((size_t)units * VKG_MODEL_MAX_UNIT_RANGES * sizeof *b->ranges);
    VKG_CHECK_GOTO(st, b->first_range && b->ranges, VKG_ERR_NOMEM, fail,
                   "no memory for gradient buckets");
    /* Units in completion order, closed into a bucket once it holds bucket_bytes. */
    int nr = 0;
    size_t bytes = 0;
    b->first_range[0] = 0;
    for (int u = 0; u < units; u++) {
        size_t r[VKG_MODEL_MAX_UNIT_RANGES][2];
        int n = vkg_model_unit_ranges(m, u, r);
        for (int i = 0; i < n; i++) {
            b->ranges[nr][0] = r[i][0], b->ranges[nr++][1] = r[i][1];
            bytes += r[i][1] * sizeof(float);
        }
        if (bytes >= bucket_bytes || u == units - 1) {
            int first = b->first_range[b->n];
            nr = first + sort_merge(b->ranges + first, nr - first);
            last[b->n] = u;
            b->first_range[++b->n] = nr;
            bytes = 0;
        }
    }
    vkg_model_pack pack = {.first = b->first_range, .ranges = (const size_t(*)[2])b->ranges};
    if (packed)
        pack.dst = *packed;
    if (slot < 0)
        VKG_TRY_GOTO(st, vkg_model_split(m, last, b->n, packed ? &pack : NULL), fail);
    else
        VKG_TRY_GOTO(st, vkg_model_split_backward(m, slot, last, b->n, packed ? &pack : NULL),
                     fail);
    free(last);
    *out = b;
    return VKG_OK;
fail:
    free(last);
    vkg_buckets_destroy(&b);
    return st;
}

int vkg_buckets_count(const vkg_buckets *b)
{
    return b->n;
}

int vkg_buckets_ranges(const vkg_buckets *b, int k, const size_t (**ranges)[2])
{
    assert(k >= 0 && k < b->n);
    *ranges = (const size_t(*)[2])b->ranges + b->first_range[k];
    return b->first_range[k + 1] - b->first_range[k];
}

size_t vkg_buckets_floats(const vkg_buckets *b, int k)
{
    assert(k >= 0 && k < b->n);
    size_t n = 0;
    for (int i = b->first_range[k]; i < b->first_range[k + 1]; i++)
        n += b->ranges[i][1];
    return n;
}

/* Bucket k's ranges, packed in order, from (out) or into the host's view of the gradients. */
static void pack(const vkg_buckets *b, int k, float *packed, int out)
{
    float *grads = vkg_model_grads_host(b->model);
    assert(grads && k >= 0 && k < b->n);
    size_t at = 0;
    for (int i = b->first_range[k]; i < b->first_range[k + 1]; i++) {
        float *g = grads + b->ranges[i][0];
        size_t n = b->ranges[i][1];
        if (out)
            memcpy(packed + at, g, n * sizeof *g);
        else
            memcpy(g, packed + at, n * sizeof *g);
        at += n;
    }
}

void vkg_buckets_read(const vkg_buckets *b, int k, float *dst)
{
    pack(b, k, dst, 1);
}

void vkg_buckets_write(vkg_buckets *b, int k, const float *src)
{
    pack(b, k, (float *)src, 0);
}
