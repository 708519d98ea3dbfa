/* The tied token embedding under data parallelism with overlapped buckets: wte's gradient is
 * the classifier's part (finished first, in the first bucket) plus the encoder's rows of the
 * micro-batch's tokens, which the split recording leaves out so that wte's bucket can be reduced
 * early. Every rank sums its encoder-output gradient per distinct token, the ranks exchange these
 * rows, and every rank adds all of them in rank order, so that all ranks stay bitwise equal.
 * Not here: the buckets (buckets.c), the rest of the reduction (reducer.c).
 */
#ifndef VKG_PARALLEL_TIED_WTE_H
#define VKG_PARALLEL_TIED_WTE_H

#include <stdint.h>

#include "model/gpt2.h"
#include "parallel/job.h"

/* After vkg_gpt2_split_finish(m): add every rank's embedding-row gradients of its last
 * micro-batch (inputs: the rank's (rank batch, T) tokens) to wte (Vp x C floats, host: the
 * reduced classifier gradient), rows in token order, ranks in rank order. Every rank calls it. */
vkg_status vkg_tied_wte_add_rows(vkg_job *job, vkg_gpt2 *m, const int32_t *inputs, float *wte);

#endif
