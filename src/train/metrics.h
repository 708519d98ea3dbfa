/* The training log: one JSON object per line appended to a log file, the train/eval loss history
 * kept in memory, and an SVG loss curve written next to the log (crash-safely, at any time).
 *
 * A line looks like
 *   {"step":12,"loss":3.14159274,"lr":0.000300000014,"grad_norm":1.5,"tokens":196608,
 *    "tokens_per_s":12345.5,"ms":1061.25,"eval_loss":3.2}
 * ("eval_loss" only when the row has one; "rank" and "world" after "step" when world > 1).
 * Real numbers are float32 printed with %.9g, so strtof gives back the same bits; a non-finite
 * value is written as null and the line gets "nonfinite":true. Numbers follow the C locale's
 * decimal point: the program must not set LC_NUMERIC to a comma locale.
 * Resuming reloads the history from an existing log and cuts the file before the first line of
 * the resumed step, so the log of a resumed run reads as one continuous run. This module does no
 * terminal output, and keeps no global state; one object per log, not thread-safe.
 * Internal to vkgpt until the trainer's public API exists.
 */
#ifndef VKG_TRAIN_METRICS_H
#define VKG_TRAIN_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "vkgpt/status.h"

typedef struct vkg_metrics_config {
    const char *log_path; /* JSON lines file; required */
    const char *svg_path; /* NULL: log_path with its extension replaced by ".svg" */
    const char *title;    /* SVG title; NULL: "vkgpt training loss" */
    int resume;           /* 0: start a new, empty log; 1: continue an existing one */
    long long first_step; /* with resume: the first step the resumed run will log */
    int rank, world;      /* "rank"/"world" go on every line when world > 1 */
} vkg_metrics_config;

typedef struct vkg_metrics_row {
    long long step;     /* the step's number as the trainer counts it */
    float loss;         /* training loss of the step */
    float lr;           /* learning rate used */
    float grad_norm;    /* global gradient norm before clipping */
    uint64_t tokens;    /* tokens trained on so far, this step included */
    float tokens_per_s; /* throughput of the step */
    float ms;           /* wall time of the step in milliseconds */
    int has_eval;       /* 1: eval_loss is written and kept in the eval history */
    float eval_loss;
    int skipped; /* 1: the step was not applied (its loss or gradient norm not finite) */
    /* --rank-batch auto (NULL: not written): the rows of each rank in this step ("5,3");
     * rebalance, when the split was chosen again after this step: the next step's split, and
     * the rows per second each rank was measured at. */
    const char *rank_batch, *rebalance, *rank_speeds;
    /* DiLoCo: > 0 when pseudo-gradient bytes were exchanged in the step: this rank's payload
     * ("outer_bytes") */
    uint64_t outer_bytes;
    /* comm: 1 in a job of 2 or more ranks: "comm_bytes" (the payload this rank handed the
     * step's collectives, vkg_step_info), "comm_ms", "exposed_comm_ms" (the part the step
     * waited for) and "compute_util" (1 - exposed / ms: the share of the step not waiting on
     * communication). */
    int comm;
    uint64_t comm_bytes;
    float comm_ms, exposed_comm_ms;
    /* > 0 under dynamic loss scaling: the scale the step ran with ("loss_scale"), and whether
     * its gradient overflowed ("overflow": true) */
    float loss_scale;
    int overflow;
} vkg_metrics_row;

/* One point of a history: the step and its loss (NaN for a logged non-finite loss). */
typedef struct vkg_metrics_point {
    long long step;
    float value;
} vkg_metrics_point;

typedef struct vkg_metrics vkg_metrics_t;

/* Defaults: no paths, default title, a new log, rank 0 of 1. */
vkg_metrics_config vkg_metrics_config_default(void);

/* Open the log. Without resume the file is created or emptied. With resume, an existing log is
 * read line by line: lines are kept, and their train loss ("loss", null = NaN) and "eval_loss"
 * loaded into the history, up to the first line whose step is >= first_step; that line and all
 * after it are cut off the file (a last line without its newline, torn by a crash, is dropped
 * too). A missing file is created. The file then stays open for appending. Errors:
 * VKG_ERR_INVALID_ARG (no log path), VKG_ERR_IO naming the file, VKG_ERR_FORMAT naming the file
 * and line when a complete line is not a flat JSON object with an integer "step",
 * VKG_ERR_NOMEM. Paths and title are copied; cfg is not kept. */
vkg_status vkg_metrics_create(const vkg_metrics_config *cfg, vkg_metrics_t **out);

/* Close the log and free everything; *m = NULL. NULL-safe. */
void vkg_metrics_destroy(vkg_metrics_t **m);

/* Append one row as a JSON line (flushed to the file before returning) and add its losses to the
 * history. Non-finite values become null and mark the line "nonfinite":true; such rows are
 * counted (vkg_metrics_nonfinite). Errors: VKG_ERR_IO naming the file (the history is then
 * unchanged), VKG_ERR_NOMEM (nothing written). */
vkg_status vkg_metrics_log(vkg_metrics_t *m, const vkg_metrics_row *row);

/* Write the loss curve as an SVG file at vkg_metrics_svg_path(m), replacing it crash-safely
 * (vkg_io_write_atomic): the train loss as one path with one point per finite history entry
 * (broken into segments at non-finite ones), eval losses as a dashed path with a circle per
 * point, axes with tick labels (step on x, loss on y), the title and a legend. Works with an
 * empty history (axes only). Errors: VKG_ERR_IO naming the file. */
vkg_status vkg_metrics_write_svg(const vkg_metrics_t *m);

/* The log and SVG paths in use (owned by m). */
const char *vkg_metrics_log_path(const vkg_metrics_t *m);
const char *vkg_metrics_svg_path(const vkg_metrics_t *m);

/* The train and eval histories (owned by m, valid until the next vkg_metrics_log), in log order;
 * *n gets the count. */
const vkg_metrics_point *vkg_metrics_train(const vkg_metrics_t *m, size_t *n);
const vkg_metrics_point *vkg_metrics_eval(const vkg_metrics_t *m, size_t *n);

/* How many rows logged through this object carried a non-finite value. */
size_t vkg_metrics_nonfinite(const vkg_metrics_t *m);

#endif
