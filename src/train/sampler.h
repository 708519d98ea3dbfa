/* Next-token sampling from one row of logits (temperature, top-k), drawing from the generator of
 * base/rng.h. Nothing here allocates, prints or keeps global state.
 */
#ifndef VKG_TRAIN_SAMPLER_H
#define VKG_TRAIN_SAMPLER_H

#include "base/rng.h"

/* Choose the next token from one row of logits, of which only the first V (>= 1) entries are read
 * (padding columns beyond V are never drawn).
 * temperature <= 0 (or NaN): argmax, the first index of the largest logit; r is not used and may
 * be NULL. Otherwise token i is drawn with probability softmax(logits / temperature) restricted to
 * the top_k largest logits (top_k <= 0 or >= V: all V; ties at the k-th value are broken toward
 * lower indices, so exactly k tokens take part), computed in double with the maximum subtracted,
 * using one vkg_rng_uniform draw from r. NaN logits are never drawn; -inf logits only when every
 * candidate is -inf (then the first candidate is returned, with no draw); a +inf logit wins
 * outright (the first one, no draw). Never fails; allocates nothing. */
int vkg_sample_token(const float *logits, int V, float temperature, int top_k, vkg_rng *r);

#endif
