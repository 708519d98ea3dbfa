/* Gradient buckets (DESIGN.md section 6): a model part's gradient units grouped, in the order the
 * backward pass completes them, into buckets of at least bucket_bytes (the last may be smaller),
 * each one command list of the part's split recording, so that a bucket can be reduced as soon as
 * the device has finished it while the device computes the rest of the backward pass.
 * Not here: the reduction (reducer.c), the encoder rows of the tied embedding (tied.c), the
 * command lists themselves (model/split.c).
 */
#ifndef VKG_PARALLEL_BUCKETS_H
#define VKG_PARALLEL_BUCKETS_H

#include <stddef.h>

#include "model/model.h"

typedef struct vkg_buckets vkg_buckets;

/* Group m's gradient units into buckets and record m's split accordingly (replacing any earlier
 * split): of the whole model's forward-backward (slot < 0, vkg_model_split) or of a part's
 * backward of that slot (vkg_model_split_backward). packed: NULL, and the host reads and writes
 * buckets with vkg_buckets_read/_write; or a host tensor of the whole gradient's size
 * (vkg_arena_import_host) into which the device copies every bucket straight at its packed place
 * (buckets one after another, each packed as vkg_buckets_read packs it) and from which split_commit
 * copies them back: read and write are then not used. m (and packed's arena) must outlive the
 * buckets. Errors: VKG_ERR_NOMEM, and vkg_model_split's. */
vkg_status vkg_buckets_create(vkg_model *m, int slot, size_t bucket_bytes, const vkg_tensor *packed,
                              vkg_buckets **out);
void vkg_buckets_destroy(vkg_buckets **pb);

int vkg_buckets_count(const vkg_buckets *b);
/* Floats in bucket k (the sum of its ranges' counts). */
size_t vkg_buckets_floats(const vkg_buckets *b, int k);
/* Bucket k's gradients as float ranges (offset, count) of the part's gradient tensor, in
 * ascending order of offset, none touching another: *ranges points at n pairs owned by b.
 * Returns n. */
int vkg_buckets_ranges(const vkg_buckets *b, int k, const size_t (**ranges)[2]);
/* After vkg_model_split_wait(m, k): bucket k's gradients, its ranges packed in order, copied out
 * of the host's view of the gradients (no device work: the device is still running later
 * buckets); write puts packed values back (made the device's by vkg_model_split_commit). */
void vkg_buckets_read(const vkg_buckets *b, int k, float *dst);
void vkg_buckets_write(vkg_buckets *b, int k, const float *src);

#endif
