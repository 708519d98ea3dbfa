/* Next-token sampling with temperature and top-k (see sampler.h). The top-k threshold is found by a
 * 4-pass radix select on order-preserving keys of the float logits, so sampling needs no allocation
 * and cannot fail. */
#include "train/sampler.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* ---- sampling ------------------------------------------------------------------------------- */

/* A key whose unsigned order is the float order (-inf < ... < -0 < +0 < ... < +inf). */
static uint32_t order_key(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

static int argmax(const float *logits, int V)
{
    int best = -1;
    for (int i = 0; i < V; i++)
        if (!isnan(logits[i]) && (best < 0 || logits[i] > logits[best]))
            best = i;
    return best < 0 ? 0 : best;
}

/* The candidate set: tokens whose key is above `key`, plus the first `ties` tokens (in index
 * order) whose key equals it. With top-k off, key = 0 and ties = V admit every non-NaN token. */
typedef struct candidates {
    uint32_t key;
    int ties;
} candidates;

/* Radix-select the k-th largest key among the non-NaN logits (1 <= k <= their count), 8 bits a
 * pass from the top; `ties` ends as the number of tokens at that key that still fit in k. */
static candidates top_k_threshold(const float *logits, int V, int k)
{
    uint32_t prefix = 0, mask = 0;
    int need = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        int hist[256] = {0};
        for (int i = 0; i < V; i++) {
            if (isnan(logits[i]))
                continue;
            uint32_t key = order_key(logits[i]);
            if ((key & mask) == prefix)
                hist[(key >> shift) & 255u]++;
        }
        int b = 255;
        for (; b > 0 && hist[b] < need; b--)
            need -= hist[b];
        prefix |= (uint32_t)b << shift;
        mask |= 255u << shift;
    }
    candidates c = {prefix, need};
    return c;
}

/* An iterator over the candidates in index order; every pass walks the same set. */
typedef struct walk {
    const float *logits;
    int V, next, ties_left;
    uint32_t key;
} walk;

static walk walk_start(const float *logits, int V, candidates c)
{
    walk w = {logits, V, 0, c.ties, c.key};
    return w;
}

/* The next candidate's index, or -1 when there are no more. */
static int walk_next(walk *w)
{
    while (w->next < w->V) {
        int i = w->next++;
        if (isnan(w->logits[i]))
            continue;
        uint32_t key = order_key(w->logits[i]);
        if (key > w->key)
            return i;
        if (key == w->key && w->ties_left > 0) {
            w->ties_left--;
            return i;
        }
    }
    return -1;
}

int vkg_sample_token(const float *logits, int V, float temperature, int top_k, vkg_rng *r)
{
    assert(logits && V >= 1);
    if (!(temperature > 0.0f))
        return argmax(logits, V);
    assert(r);
    int valid = 0;
    for (int i = 0; i < V; i++)
        valid += !isnan(logits[i]);
    if (valid == 0)
        return 0;
    candidates cand = {0, V};
    if (top_k > 0 && top_k < valid)
        cand = top_k_threshold(logits, V, top_k);

    walk w = walk_start(logits, V, cand);
    int first = walk_next(&w), i;
    double mx = logits[first];
    while ((i = walk_next(&w)) >= 0)
        if (logits[i] > mx)
            mx = logits[i];
    if (isinf(mx)) { /* every candidate -inf, or a +inf among them: no softmax to take */
        if (mx < 0)
            return first;
        for (w = walk_start(logits, V, cand); (i = walk_next(&w)) >= 0;)
            if (logits[i] == mx)
                return i;
    }
    double inv_t = 1.0 / (double)temperature, sum = 0.0;
    for (w = walk_start(logits, V, cand); (i = walk_next(&w)) >= 0;)
        sum += exp(((double)logits[i] - mx) * inv_t);
    double u = vkg_rng_uniform(r) * sum, cum = 0.0;
    int last = first;
    for (w = walk_start(logits, V, cand); (i = walk_next(&w)) >= 0;) {
        double p = exp(((double)logits[i] - mx) * inv_t);
        if (p <= 0.0)
            continue;
        cum += p;
        last = i;
        if (u < cum)
            return i;
    }
    return last; /* rounding left u at the very top: the last candidate with weight */
}
