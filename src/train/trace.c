/* Chrome trace-event JSON of a rank's timeline (see trace.h). */
#include "os/clock.h"
#include "train/trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

struct vkg_trace {
    FILE *f;
    char path[1100];
    int rank, events;
    double origin_ms; /* the monotonic clock at open: time 0 of the trace */
};

static const char *const kind_names[] = {"forward",   "backward",  "send",  "recv",
                                         "allreduce", "optimizer", "weight"};

const char *vkg_span_kind_name(vkg_span_kind kind)
{
    return (unsigned)kind < sizeof kind_names / sizeof kind_names[0] ? kind_names[kind] : "?";
}

static vkg_status io_error(const vkg_trace *t, const char *what)
{
    return VKG_FAIL(VKG_ERR_IO, "trace %s: cannot %s: %s", t->path, what, strerror(errno));
}

vkg_status vkg_trace_open(const char *path, int rank, int world, vkg_trace **out)
{
    vkg_trace *t = calloc(1, sizeof *t);
    VKG_CHECK(t, VKG_ERR_NOMEM, "no memory for a trace");
    if (world > 1)
        snprintf(t->path, sizeof t->path, "%s.rank%d", path, rank);
    else
        snprintf(t->path, sizeof t->path, "%s", path);
    t->rank = rank;
    t->origin_ms = vkg_os_now_ms();
    t->f = fopen(t->path, "wb");
    if (!t->f || fprintf(t->f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n") < 0) {
        vkg_status st = io_error(t, "write");
        if (t->f)
            fclose(t->f);
        free(t);
        return st;
    }
    *out = t;
    return VKG_OK;
}

vkg_status vkg_trace_write(vkg_trace *t, long long step, const vkg_span *spans, int n)
{
    for (int i = 0; i < n; i++) {
        const vkg_span *s = &spans[i];
        char name[32];
        if (s->micro >= 0)
            snprintf(name, sizeof name, "%c%d", vkg_span_kind_name(s->kind)[0] - 32, s->micro);
        else
            snprintf(name, sizeof name, "%s", vkg_span_kind_name(s->kind));
        if (fprintf(t->f,
                    "%s{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %.1f, \"dur\": "
                    "%.1f, \"pid\": %d, \"tid\": 0, \"args\": {\"step\": %lld, \"micro\": %d}}",
                    t->events++ ? ",\n" : "", name, vkg_span_kind_name(s->kind),
                    (s->t0 - t->origin_ms) * 1e3, (s->t1 - s->t0) * 1e3, t->rank, step,
                    s->micro) < 0)
            return io_error(t, "write");
    }
    return fflush(t->f) == 0 ? VKG_OK : io_error(t, "write");
}

vkg_status vkg_trace_close(vkg_trace **pt)
{
    vkg_trace *t = pt ? *pt : NULL;
    if (!t)
        return VKG_OK;
    vkg_status st = VKG_OK;
    if (fprintf(t->f, "\n]}\n") < 0 || fflush(t->f) != 0)
        st = io_error(t, "write");
    if (fclose(t->f) != 0 && st == VKG_OK)
        st = io_error(t, "close");
    free(t);
    *pt = NULL;
    return st;
}
