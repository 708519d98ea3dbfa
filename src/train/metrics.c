/* The training log (JSON lines), its reload on resume, the in-memory loss history and the SVG loss
 * curve (see metrics.h). The reader understands only the flat objects this writer produces (keys
 * without escapes, numbers, null, true/false, simple strings); it is no general JSON parser. */
#include "train/metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "os/file.h"
#include "vkgpt/io.h"

#define LINE_CAP 1536
#define SVG_W 800.0
#define SVG_H 500.0
#define PLOT_L 80.0 /* plot area inside the margins */
#define PLOT_R 780.0
#define PLOT_T 50.0
#define PLOT_B 440.0

typedef struct history {
    vkg_metrics_point *p;
    size_t n, cap;
} history;

struct vkg_metrics {
    char *log_path, *svg_path, *title;
    FILE *log;
    int rank, world;
    history train, eval;
    size_t nonfinite;
};

vkg_metrics_config vkg_metrics_config_default(void)
{
    vkg_metrics_config c = {NULL, NULL, NULL, 0, 0, 0, 1};
    return c;
}

/* ---- history -------------------------------------------------------------------------------- */

/* Make room for one more point. */
static vkg_status history_reserve(history *h)
{
    if (h->n < h->cap)
        return VKG_OK;
    size_t cap = h->cap ? 2 * h->cap : 256;
    vkg_metrics_point *p = realloc(h->p, cap * sizeof *p);
    VKG_CHECK(p, VKG_ERR_NOMEM, "metrics: out of memory growing the history to %zu points", cap);
    h->p = p;
    h->cap = cap;
    return VKG_OK;
}

static void history_push(history *h, long long step, float value)
{
    h->p[h->n].step = step;
    h->p[h->n].value = value;
    h->n++;
}

/* ---- reading an existing log ---------------------------------------------------------------- */

typedef struct parsed_line {
    int has_step, has_loss, has_eval;
    long long step;
    float loss, eval_loss;
} parsed_line;

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\r')
        p++;
    return p;
}

/* Parse one NUL-terminated line holding a flat JSON object. Returns NULL on success, else what
 * was wrong. */
static const char *parse_line(const char *s, parsed_line *out)
{
    memset(out, 0, sizeof *out);
    const char *p = skip_ws(s);
    if (*p++ != '{')
        return "expected '{'";
    p = skip_ws(p);
    int more = *p != '}';
    if (!more)
        p++;
    while (more) {
        if (*p++ != '"')
            return "expected a key";
        const char *key = p;
        while (*p && *p != '"' && *p != '\\')
            p++;
        if (*p != '"')
            return "unterminated or escaped key";
        size_t klen = (size_t)(p - key);
        p = skip_ws(p + 1);
        if (*p++ != ':')
            return "expected ':'";
        p = skip_ws(p);
        char *end = (char *)p;
        int is_null = !strncmp(p, "null", 4);
        if (klen == 4 && !strncmp(key, "step", 4)) {
            out->step = strtoll(p, &end, 10);
            if (end == p)
                return "\"step\" is not an integer";
            out->has_step = 1;
        } else if (*p == '"') {
            for (end++; *end && *end != '"'; end++)
                if (*end == '\\' && end[1])
                    end++;
            if (*end++ != '"')
                return "unterminated string";
        } else if (is_null || !strncmp(p, "true", 4)) {
            end += 4;
        } else if (!strncmp(p, "false", 5)) {
            end += 5;
        } else {
            float v = strtof(p, &end);
            if (end == p || !isfinite(v))
                return "bad value";
            if (klen == 4 && !strncmp(key, "loss", 4))
                out->has_loss = 1, out->loss = v;
            else if (klen == 9 && !strncmp(key, "eval_loss", 9))
                out->has_eval = 1, out->eval_loss = v;
        }
        if (is_null && klen == 4 && !strncmp(key, "loss", 4))
            out->has_loss = 1, out->loss = NAN;
        p = skip_ws(end);
        if (*p != ',' && *p != '}')
            return "expected ',' or '}' after a value";
        more = *p++ == ',';
        p = skip_ws(p);
    }
    if (*skip_ws(p) != '\0')
        return "text after the object";
    if (!out->has_step)
        return "no \"step\"";
    return NULL;
}

/* Reload the history from the log and cut it before the first line of a step >= first_step (or
 * before a last line without its newline). */
static vkg_status resume_log(vkg_metrics_t *m, long long first_step)
{
    FILE *f = fopen(m->log_path, "rb");
    if (!f && errno == ENOENT)
        return VKG_OK;
    VKG_CHECK(f, VKG_ERR_IO, "%s: cannot open the log to resume it: %s", m->log_path,
              strerror(errno));
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    long long keep = 0;
    long long len;
    vkg_status st = VKG_OK;
    int err = 0;
    while ((len = vkg_os_getline(&line, &cap, f)) > 0 && line[len - 1] == '\n') {
        line[len - 1] = '\0';
        lineno++;
        parsed_line pl;
        const char *why = parse_line(line, &pl);
        VKG_CHECK_GOTO(st, !why, VKG_ERR_FORMAT, done, "%s:%zu: not a log line (%s)", m->log_path,
                       lineno, why);
        if (pl.step >= first_step)
            break;
        VKG_TRY_GOTO(st, history_reserve(&m->train), done);
        VKG_TRY_GOTO(st, history_reserve(&m->eval), done);
        if (pl.has_loss)
            history_push(&m->train, pl.step, pl.loss);
        if (pl.has_eval)
            history_push(&m->eval, pl.step, pl.eval_loss);
        keep += len;
    }
    VKG_CHECK_GOTO(st, !ferror(f) && fseeko(f, 0, SEEK_END) == 0, VKG_ERR_IO, done,
                   "%s: read error: %s", m->log_path, strerror(errno));
    if (keep < (long long)ftello(f))
        VKG_CHECK_GOTO(st, (err = vkg_os_truncate(m->log_path, (unsigned long long)keep)) == 0,
                       VKG_ERR_IO, done, "%s: cannot cut the log at byte %lld to resume: %s",
                       m->log_path, (long long)keep, strerror(err));
done:
    free(line);
    fclose(f);
    return st;
}

/* ---- create / destroy ----------------------------------------------------------------------- */

static char *dup_str(const char *s)
{
    char *d = malloc(strlen(s) + 1);
    if (d)
        strcpy(d, s);
    return d;
}

/* log_path with the extension of its last component replaced by ".svg" (or ".svg" appended). */
static char *derive_svg_path(const char *log_path)
{
    const char *slash = strrchr(log_path, '/');
    const char *dot = strrchr(slash ? slash + 1 : log_path, '.');
    size_t stem =
        dot && dot != (slash ? slash + 1 : log_path) ? (size_t)(dot - log_path) : strlen(log_path);
    char *s = malloc(stem + 5);
    if (s) {
        memcpy(s, log_path, stem);
        memcpy(s + stem, ".svg", 5);
    }
    return s;
}

vkg_status vkg_metrics_create(const vkg_metrics_config *cfg, vkg_metrics_t **out)
{
    vkg_status st = VKG_OK;
    *out = NULL;
    VKG_CHECK(cfg && cfg->log_path && cfg->log_path[0], VKG_ERR_INVALID_ARG,
              "metrics: no log path given");
    vkg_metrics_t *m = calloc(1, sizeof *m);
    VKG_CHECK(m, VKG_ERR_NOMEM, "metrics: out of memory");
    m->rank = cfg->rank;
    m->world = cfg->world;
    m->log_path = dup_str(cfg->log_path);
    m->svg_path = cfg->svg_path ? dup_str(cfg->svg_path) : derive_svg_path(cfg->log_path);
    m->title = dup_str(cfg->title ? cfg->title : "vkgpt training loss");
    VKG_CHECK_GOTO(st, m->log_path && m->svg_path && m->title, VKG_ERR_NOMEM, fail,
                   "metrics: out of memory");
    if (cfg->resume)
        VKG_TRY_GOTO(st, resume_log(m, cfg->first_step), fail);
    m->log = fopen(m->log_path, cfg->resume ? "ab" : "wb"); /* "\n" line ends everywhere */
    VKG_CHECK_GOTO(st, m->log, VKG_ERR_IO, fail, "%s: cannot open the log for writing: %s",
                   m->log_path, strerror(errno));
    *out = m;
    return VKG_OK;
fail:
    vkg_metrics_destroy(&m);
    return st;
}

void vkg_metrics_destroy(vkg_metrics_t **pm)
{
    if (!pm || !*pm)
        return;
    vkg_metrics_t *m = *pm;
    if (m->log)
        fclose(m->log);
    free(m->train.p);
    free(m->eval.p);
    free(m->log_path);
    free(m->svg_path);
    free(m->title);
    free(m);
    *pm = NULL;
}

/* ---- logging -------------------------------------------------------------------------------- */

/* Append ,"name":value to the line (%.9g, or null for a non-finite value, counted in *bad). */
static size_t put_float(char *line, size_t at, const char *name, float v, int *bad)
{
    if (!isfinite(v)) {
        *bad = 1;
        return at + (size_t)snprintf(line + at, LINE_CAP - at, ",\"%s\":null", name);
    }
    return at + (size_t)snprintf(line + at, LINE_CAP - at, ",\"%s\":%.9g", name, (double)v);
}

vkg_status vkg_metrics_log(vkg_metrics_t *m, const vkg_metrics_row *row)
{
    char line[LINE_CAP];
    int bad = 0;
    VKG_TRY(history_reserve(&m->train));
    VKG_TRY(history_reserve(&m->eval));
    size_t at = (size_t)snprintf(line, sizeof line, "{\"step\":%lld", row->step);
    if (m->world > 1)
        at += (size_t)snprintf(line + at, sizeof line - at, ",\"rank\":%d,\"world\":%d", m->rank,
                               m->world);
    at = put_float(line, at, "loss", row->loss, &bad);
    at = put_float(line, at, "lr", row->lr, &bad);
    at = put_float(line, at, "grad_norm", row->grad_norm, &bad);
    at += (size_t)snprintf(line + at, sizeof line - at, ",\"tokens\":%" PRIu64, row->tokens);
    at = put_float(line, at, "tokens_per_s", row->tokens_per_s, &bad);
    at = put_float(line, at, "ms", row->ms, &bad);
    if (row->has_eval)
        at = put_float(line, at, "eval_loss", row->eval_loss, &bad);
    if (row->rank_batch) /* digits and commas only: nothing to escape */
        at += (size_t)snprintf(line + at, sizeof line - at, ",\"rank_batch\":\"%.200s\"",
                               row->rank_batch);
    if (row->rebalance)
        at += (size_t)snprintf(line + at, sizeof line - at,
                               ",\"rebalance\":\"%.200s\",\"rank_rows_per_s\":\"%.200s\"",
                               row->rebalance, row->rank_speeds ? row->rank_speeds : "");
    if (row->outer_bytes)
        at += (size_t)snprintf(line + at, sizeof line - at, ",\"outer_bytes\":%" PRIu64,
                               row->outer_bytes);
    if (row->loss_scale > 0.0f)
        at += (size_t)snprintf(line + at, sizeof line - at, ",\"loss_scale\":%.9g%s",
                               (double)row->loss_scale, row->overflow ? ",\"overflow\":true" : "");
    if (row->comm) {
        at += (size_t)snprintf(line + at, sizeof line - at, ",\"comm_bytes\":%" PRIu64,
                               row->comm_bytes);
        at = put_float(line, at, "comm_ms", row->comm_ms, &bad);
        at = put_float(line, at, "exposed_comm_ms", row->exposed_comm_ms, &bad);
        float util = row->ms > 0.0f ? 1.0f - row->exposed_comm_ms / row->ms : 1.0f;
        at = put_float(line, at, "compute_util", util < 0.0f ? 0.0f : util, &bad);
    }
    snprintf(line + at, sizeof line - at, "%s%s}\n", bad ? ",\"nonfinite\":true" : "",
             row->skipped ? ",\"skipped\":true" : "");
    VKG_CHECK(fputs(line, m->log) >= 0 && fflush(m->log) == 0, VKG_ERR_IO,
              "%s: cannot append to the log: %s", m->log_path, strerror(errno));
    history_push(&m->train, row->step, isfinite(row->loss) ? row->loss : NAN);
    if (row->has_eval)
        history_push(&m->eval, row->step, isfinite(row->eval_loss) ? row->eval_loss : NAN);
    m->nonfinite += (size_t)bad;
    return VKG_OK;
}

/* ---- SVG ------------------------------------------------------------------------------------ */

typedef struct axis {
    double lo, hi, tick; /* range rounded out to whole ticks */
} axis;

/* A range [lo, hi] rounded out to about 5 ticks of 1, 2 or 5 times a power of ten. */
static axis nice_axis(double lo, double hi, double min_tick)
{
    if (!(hi > lo)) {
        double pad = fabs(lo) > 1e-3 ? fabs(lo) * 0.1 : 0.5;
        lo -= pad;
        hi += pad;
    }
    double raw = (hi - lo) / 5.0, p10 = pow(10.0, floor(log10(raw))), f = raw / p10;
    double tick = (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0) * p10;
    if (tick < min_tick)
        tick = min_tick;
    axis a = {floor(lo / tick) * tick, ceil(hi / tick) * tick, tick};
    return a;
}

typedef struct svg_ctx {
    const vkg_metrics_t *m;
    axis x, y;
} svg_ctx;

static double px(const svg_ctx *c, double step)
{
    return PLOT_L + (step - c->x.lo) / (c->x.hi - c->x.lo) * (PLOT_R - PLOT_L);
}

static double py(const svg_ctx *c, double loss)
{
    return PLOT_B - (loss - c->y.lo) / (c->y.hi - c->y.lo) * (PLOT_B - PLOT_T);
}

/* Write text with XML's special characters escaped. */
static void put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        const char *e = *s == '&'   ? "&amp;"
                        : *s == '<' ? "&lt;"
                        : *s == '>' ? "&gt;"
                        : *s == '"' ? "&quot;"
                                    : NULL;
        if (e)
            fputs(e, f);
        else
            fputc(*s, f);
    }
}

static void put_ticks(FILE *f, const svg_ctx *c)
{
    for (int i = 0; c->x.lo + i * c->x.tick <= c->x.hi + 1e-9 * c->x.tick; i++) {
        double v = c->x.lo + i * c->x.tick, x = px(c, v);
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.0f\" x2=\"%.2f\" y2=\"%.0f\" stroke=\"#ddd\"/>\n", x,
                PLOT_T, x, PLOT_B);
        fprintf(f, "<text x=\"%.2f\" y=\"%.0f\" text-anchor=\"middle\">%.10g</text>\n", x,
                PLOT_B + 18, v);
    }
    for (int i = 0; c->y.lo + i * c->y.tick <= c->y.hi + 1e-9 * c->y.tick; i++) {
        double v = c->y.lo + i * c->y.tick, y = py(c, v);
        if (fabs(v) < 1e-9 * c->y.tick)
            v = 0.0;
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.2f\" x2=\"%.0f\" y2=\"%.2f\" stroke=\"#ddd\"/>\n",
                PLOT_L, y, PLOT_R, y);
        fprintf(f, "<text x=\"%.0f\" y=\"%.2f\" text-anchor=\"end\">%.6g</text>\n", PLOT_L - 6,
                y + 4, v);
    }
}

/* One path through the finite points of h, a new segment ("M") after each non-finite one. */
static void put_curve(FILE *f, const svg_ctx *c, const history *h, const char *style)
{
    fprintf(f, "<path %s d=\"", style);
    int pen_down = 0;
    for (size_t i = 0; i < h->n; i++) {
        if (!isfinite(h->p[i].value)) {
            pen_down = 0;
            continue;
        }
        fprintf(f, "%s%.2f %.2f", pen_down ? " L" : (i ? " M" : "M"), px(c, (double)h->p[i].step),
                py(c, h->p[i].value));
        pen_down = 1;
    }
    fputs("\"/>\n", f);
}

static vkg_status write_svg(FILE *f, void *ctx)
{
    svg_ctx *c = ctx;
    const vkg_metrics_t *m = c->m;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
            SVG_W, SVG_H, SVG_W, SVG_H);
    fprintf(f, "<rect width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", SVG_W, SVG_H);
    fprintf(f, "<text x=\"%.0f\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">", SVG_W / 2);
    put_escaped(f, m->title);
    fputs("</text>\n", f);
    put_ticks(f, c);
    fprintf(f, "<path d=\"M%.0f %.0f L%.0f %.0f L%.0f %.0f\" fill=\"none\" stroke=\"black\"/>\n",
            PLOT_L, PLOT_T, PLOT_L, PLOT_B, PLOT_R, PLOT_B);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">step</text>\n",
            (PLOT_L + PLOT_R) / 2, SVG_H - 22);
    fprintf(f,
            "<text x=\"20\" y=\"%.0f\" text-anchor=\"middle\" transform=\"rotate(-90 20 %.0f)\">"
            "loss</text>\n",
            (PLOT_T + PLOT_B) / 2, (PLOT_T + PLOT_B) / 2);
    put_curve(f, c, &m->train,
              "id=\"train\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\"");
    put_curve(f, c, &m->eval,
              "id=\"eval\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.5\" "
              "stroke-dasharray=\"5 3\"");
    for (size_t i = 0; i < m->eval.n; i++)
        if (isfinite(m->eval.p[i].value))
            fprintf(f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"#d62728\"/>\n",
                    px(c, (double)m->eval.p[i].step), py(c, m->eval.p[i].value));
    double lx = PLOT_R - 130, ly = PLOT_T + 12;
    fprintf(f,
            "<g id=\"legend\">\n<rect x=\"%.0f\" y=\"%.0f\" width=\"125\" height=\"42\" "
            "fill=\"white\" stroke=\"#999\"/>\n",
            lx - 5, ly - 10);
    fprintf(f,
            "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#1f77b4\" "
            "stroke-width=\"2\"/><text x=\"%.0f\" y=\"%.0f\">train loss</text>\n",
            lx, ly, lx + 25, ly, lx + 32, ly + 4);
    fprintf(f,
            "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#d62728\" "
            "stroke-dasharray=\"5 3\"/><circle cx=\"%.1f\" cy=\"%.0f\" r=\"3\" "
            "fill=\"#d62728\"/><text x=\"%.0f\" y=\"%.0f\">eval loss</text>\n</g>\n",
            lx, ly + 20, lx + 25, ly + 20, lx + 12.5, ly + 20, lx + 32, ly + 24);
    fputs("</svg>\n", f);
    VKG_CHECK(!ferror(f), VKG_ERR_IO, "write error: %s", strerror(errno));
    return VKG_OK;
}

/* Extend the step range by every point of h and the loss range by its finite values. */
static void extend(const history *h, double *xlo, double *xhi, double *ylo, double *yhi)
{
    for (size_t i = 0; i < h->n; i++) {
        double s = (double)h->p[i].step, v = h->p[i].value;
        *xlo = fmin(*xlo, s);
        *xhi = fmax(*xhi, s);
        if (isfinite(v)) {
            *ylo = fmin(*ylo, v);
            *yhi = fmax(*yhi, v);
        }
    }
}

vkg_status vkg_metrics_write_svg(const vkg_metrics_t *m)
{
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    extend(&m->train, &xlo, &xhi, &ylo, &yhi);
    extend(&m->eval, &xlo, &xhi, &ylo, &yhi);
    if (!(xlo <= xhi))
        xlo = 0, xhi = 1;
    if (!(ylo <= yhi))
        ylo = 0, yhi = 1;
    svg_ctx c = {m, nice_axis(xlo, xhi, 1.0), nice_axis(ylo, yhi, 0.0)};
    return vkg_io_write_atomic(m->svg_path, write_svg, &c);
}

const char *vkg_metrics_log_path(const vkg_metrics_t *m)
{
    return m->log_path;
}

const char *vkg_metrics_svg_path(const vkg_metrics_t *m)
{
    return m->svg_path;
}

const vkg_metrics_point *vkg_metrics_train(const vkg_metrics_t *m, size_t *n)
{
    *n = m->train.n;
    return m->train.p;
}

const vkg_metrics_point *vkg_metrics_eval(const vkg_metrics_t *m, size_t *n)
{
    *n = m->eval.n;
    return m->eval.p;
}

size_t vkg_metrics_nonfinite(const vkg_metrics_t *m)
{
    return m->nonfinite;
}
