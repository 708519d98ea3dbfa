/* A rank's timeline: spans of work and communication, for traces (Chrome trace-event JSON) and
 * schedule pictures. Plain types, no Vulkan. */
#ifndef VKGPT_TIMELINE_H
#define VKGPT_TIMELINE_H

#ifdef __cplusplus
extern "C" {
#endif

/* One span of a rank's timeline of the last step (pipelines): what ran, for which micro-batch,
 * from t0 to t1 (milliseconds on the monotonic clock). */
typedef enum vkg_span_kind {
    VKG_SPAN_FORWARD,
    VKG_SPAN_BACKWARD,
    VKG_SPAN_SEND,
    VKG_SPAN_RECV,
    VKG_SPAN_ALLREDUCE,
    VKG_SPAN_OPTIMIZER,
    VKG_SPAN_WEIGHT /* the backward's weight pass, run apart from its input pass (ZB-H1) */
} vkg_span_kind;
typedef struct vkg_span {
    vkg_span_kind kind;
    int micro; /* micro-batch, -1 when none */
    double t0, t1;
} vkg_span;

/* "forward", "backward", "send", "recv", "allreduce", "optimizer", "weight" ("?" out of
 * range). */
const char *vkg_span_kind_name(vkg_span_kind kind);

#ifdef __cplusplus
}
#endif
#endif
