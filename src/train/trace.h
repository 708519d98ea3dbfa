/* Timeline traces: a rank's spans of every step written as Chrome trace-event JSON (the format
 * Perfetto, chrome://tracing and PyTorch's profiler use): one complete event ("ph": "X") per
 * span, process = rank, times in microseconds from the trace's start.
 * Not here: what the spans are (src/parallel records them). */
#ifndef VKG_TRAIN_TRACE_H
#define VKG_TRAIN_TRACE_H

#include <stdint.h>

#include "vkgpt/status.h"
#include "vkgpt/timeline.h"

typedef struct vkg_trace vkg_trace;

/* Create path (with several ranks: path.rank<N>) for rank's events. Errors: VKG_ERR_IO naming
 * the file. */
vkg_status vkg_trace_open(const char *path, int rank, int world, vkg_trace **out);
/* Append step's spans. Errors: VKG_ERR_IO naming the file (a full disk). */
vkg_status vkg_trace_write(vkg_trace *t, long long step, const vkg_span *spans, int n);
/* Finish the JSON and close (NULL-safe; nulls *pt). Errors as write. */
vkg_status vkg_trace_close(vkg_trace **pt);

#endif
