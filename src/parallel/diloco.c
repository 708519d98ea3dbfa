/* DiLoCo (--sync diloco; DESIGN.md section 6, "Slow links"): data parallelism whose replicas
 * synchronise every H optimizer steps instead of every step, and its streaming form.
 *
 * Each rank holds the whole model and its own AdamW, and trains on its slice of every global
 * micro-batch as dp does, but nothing sums its gradients: its gradient is the mean over its own
 * tokens (the model's loss scale is 1, not its token share) and its inner AdamW step is its own,
 * clipped by its own norm. Only the loss (token-weighted over the group, for the log), the stop
 * request and whether any rank's loss or norm was not finite (then every rank skips the update
 * alike) are summed each step: three floats. After every optimizer step t with t % H == 0 the
 * outer step (outer.h) runs over the group: the pseudo-gradient exchanged in fp32, bf16 or int8,
 * the Nesterov update of the global parameters, and every replica set to them. The round's
 * position is the step count itself, so a run resumed at any step continues the round it was in.
 * A round in which a step was skipped ends without its outer step (a diverged replica must not
 * be averaged in): the global parameters and the momentum stay, and every replica takes the
 * global parameters; so does a round whose exchanged sums are not finite. Streaming: a fragment
 * whose exchange is in flight when a step is skipped lands taking the new global parameters
 * whole (no mix with its own).
 *
 * Streaming (Douillard et al. 2025; --fragments F, --outer-delay D, --outer-mix a): the
 * parameters are F fragments (vkg_diloco_fragment_ranges: strided layers, a share of the
 * embeddings' rows), each with its own outer optimizer over its parameters packed in order;
 * fragment p's round ends after the steps t with t % H == ((p + 1) H / F) % H, so the exchanges
 * are spread over the round. With D >= 1 the fragment's parameters at its round's end are
 * copied to its exchange buffer and the exchange is cut into D pieces (at multiples of the int8
 * chunk, so the pieces exchange what the whole would); piece k runs as the job's background
 * exchange (vkg_job_background) beside the device's work of step t + k + 1, and the step waits
 * for it (the exposed part) only before its own three floats. After step t + D the fragment's
 * outer step lands: g' from the exchanged sums, and the replica's fragment becomes a x its own +
 * (1 - a) x g'. One thread uses the communicator at a time: every job call that communicates
 * waits for the background exchange first (job.h). F = 1 with D = 0 is plain DiLoCo, bit for
 * bit.
 *
 * Pipelines (--pp S): each replica is a pipeline of S stages, and every stage runs the outer
 * rounds of its own parameters over its data-parallel group (the same stage of every replica;
 * the step's tail, step.c, calls vkg__diloco_end_step after every update). A fragment on a stage is
 * the part of it the stage holds (possibly nothing: no exchange). The tied embedding's two copies
 * (first and last stage) are exchanged by both stages as a piece of their own, so that both see the
 * same sums in the same order and stay bitwise equal; checkpoints check that they do. Exchanges are
 * blocking under pipelines (no --outer-delay): a worker would share the communicator with the
 * pipeline's own messages, which take it all through the step.
 *
 * Checkpoints: rank 0's model and moments go to model.bin and state.bin as for dp; the rest of
 * the state (the global parameters, the outer momentum, and each other replica's parameters and
 * moments, which differ from rank 0's inside a round; with a delay, every replica's exchange
 * buffers in flight, the pieces up to the checkpoint's step done) is vkg_strategy_outer_state,
 * written beside them (outer.bin) in the whole model's order whatever the stages (every rank
 * sends its part to rank 0), so a run resumes bitwise on the same number of replicas: the
 * fragments in flight follow from the step count.
 *
 * Not done: ZeRO (refused). Not here: the exchange and the update (outer.c), the passes
 * (whole.c, pp_strategy.c). Nothing here prints.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "os/clock.h"
#include "parallel/outer.h"
#include "parallel/whole.h"

/* Point-to-point tags of a replica's state on its way to or from rank 0: | 0, 1, 2, 3 for the
 * parameters, m, v and the exchanges in flight. */
#define TAG_OUTER_STATE 0x51000000u

/* A fragment: its ranges of the whole parameter vector, its own outer optimizer over them packed
 * in range order, and the buffer of its exchange (the replica's parameters at the round's end,
 * then the sums). */
typedef struct frag {
    size_t *ranges; /* (first, count) pairs */
    int nranges;
    size_t n;
    int offset; /* its exchange starts after every step t with t % H == offset */
    vkg_outer *outer;
    float *buf;
    uint32_t t0; /* the step its exchange started (in flight while t0 && t < t0 + delay) */
    size_t tied; /* pipelines: the leading floats of buf, the tied embedding's, exchanged alone */
    /* A step was skipped (a loss or norm not finite on some rank) since the fragment's
     * parameters were last gathered or set: its round is not exchanged (the same on every rank:
     * the skip is the job's). */
    int tainted;
} frag;

/* One piece of an exchange for the worker: fragment f's [first, first + count). */
typedef struct piece {
    int f;
    size_t first, count;
} piece;

struct vkg_diloco {
    frag *frags;
    int F, delay, H;
    float mix;
    vkg_outer_dtype dt;
    float *host;         /* (n) the replica's parameters on the host */
    float *hm, *hv, *hf; /* a replica's moments and exchanges in flight, for checkpoints */
    size_t n;
    /* The exchange pieces of the step that runs now, the job's background exchange. */
    piece *pieces;
    int npieces;
    double worker_ms; /* the pieces' time in the background */
    uint64_t worker_bytes;
    /* The data-parallel group the exchanges run over (the whole job, or under pipelines the
     * stage's) and the stages' layouts (rank 0 assembles checkpoints). */
    vkg_group_t *group;
    int S;
    vkg_model_layout *stage_lo; /* (S) */
    size_t max_part;            /* the largest stage's parameter count */
};
typedef struct vkg_diloco vkg_diloco;

/* The delay a config asks for: --outer-delay, or its default (1 with 2 or more fragments, 0
 * under pipelines). */
static int delay_of(const vkg_strategy_config *c)
{
    return c->par.outer_delay >= 0                  ? c->par.outer_delay
           : c->par.fragments > 1 && c->par.pp <= 1 ? 1
                                                    : 0;
}

static int fragments_of(const vkg_strategy_config *c)
{
    return c->par.fragments > 0 ? c->par.fragments : 1;
}

void vkg__diloco_describe(const vkg_strategy_config *c, char *buf, size_t cap)
{
    int F = fragments_of(c), delay = delay_of(c);
    const char *dt = vkg_outer_dtype_name((vkg_outer_dtype)c->par.outer_dtype);
    if (!delay && F == 1)
        snprintf(buf, cap,
                 "%d inner steps, then the pseudo-gradient exchanged in %s and an outer Nesterov "
                 "step (lr %g, momentum %g)",
                 c->par.inner_steps, dt, (double)c->par.outer_lr, (double)c->par.outer_momentum);
    else if (!delay)
        snprintf(buf, cap,
                 "%d fragments, each's round of %d inner steps ending at staggered steps, then "
                 "its pseudo-gradient exchanged in %s (blocking%s) and an outer Nesterov step "
                 "(lr %g, momentum %g)",
                 F, c->par.inner_steps, dt, c->par.pp > 1 ? ", as under pipelines" : "",
                 (double)c->par.outer_lr, (double)c->par.outer_momentum);
    else
        snprintf(buf, cap,
                 "streaming: %d fragments, each's round of %d inner steps ending %s; its "
                 "pseudo-gradient exchanged in %s beside the next %d steps, then an outer Nesterov "
                 "step (lr %g, momentum %g) landing as %g x the replica's + %g x the global",
                 F, c->par.inner_steps, F > 1 ? "at staggered steps" : "together", dt, delay,
                 (double)c->par.outer_lr, (double)c->par.outer_momentum,
                 delay ? (double)c->par.outer_mix : 0.0,
                 delay ? 1.0 - (double)c->par.outer_mix : 1.0);
}

vkg_status vkg__diloco_check(const vkg_strategy_config *c, const vkg_job_layout *lay)
{
    VKG_CHECK(c->par.sync == VKG_SYNC_STEP || c->par.sync == VKG_SYNC_DILOCO, VKG_ERR_INVALID_ARG,
              "--sync: %d is neither step nor diloco", c->par.sync);
    if (c->par.sync == VKG_SYNC_STEP)
        return VKG_OK;
    VKG_CHECK(c->par.inner_steps >= 1, VKG_ERR_INVALID_ARG,
              "--inner-steps must be >= 1 with --sync diloco (the inner steps per outer step), "
              "got %d",
              c->par.inner_steps);
    VKG_CHECK(lay->pp == 1 || c->par.outer_delay <= 0, VKG_ERR_INVALID_ARG,
              "--outer-delay %d does not combine with --pp %d: under pipelines the exchanges are "
              "blocking (the pipeline's messages use the communicator through the step; drop "
              "--outer-delay)",
              c->par.outer_delay, lay->pp);
    VKG_CHECK(!c->par.zero, VKG_ERR_INVALID_ARG,
              "--sync diloco does not combine with --zero 1: each replica keeps its own AdamW "
              "moments, which ZeRO would shard over the replicas (drop --zero)");
    VKG_CHECK(c->par.grad_dtype == VKG_COMM_F32, VKG_ERR_INVALID_ARG,
              "--grad-dtype has no effect with --sync diloco: no gradients are exchanged (the "
              "pseudo-gradient's dtype is --outer-dtype)");
    VKG_CHECK(lay->dp >= 2, VKG_ERR_INVALID_ARG,
              "--sync diloco needs 2 or more data-parallel ranks, got %d: one replica has nothing "
              "to average with (--world-size, or vkgpt launch -n N)",
              lay->dp);
    int F = fragments_of(c), delay = delay_of(c);
    VKG_CHECK(F <= c->par.inner_steps, VKG_ERR_INVALID_ARG,
              "--fragments %d needs --inner-steps of at least %d (each fragment's exchange starts "
              "at its own step of the H), got %d",
              F, F, c->par.inner_steps);
    VKG_CHECK(delay <= c->par.inner_steps, VKG_ERR_INVALID_ARG,
              "--outer-delay %d is longer than a round (--inner-steps %d): a fragment's exchange "
              "must end before its next one starts",
              delay, c->par.inner_steps);
    VKG_CHECK(c->par.outer_mix >= 0.0f && c->par.outer_mix < 1.0f, VKG_ERR_INVALID_ARG,
              "--outer-mix must be in [0, 1) (the weight of the replica's own parameters when a "
              "delayed outer step lands), got %g",
              (double)c->par.outer_mix);
    vkg_outer *o = NULL; /* the outer flags, checked before the job is joined */
    VKG_TRY(vkg_outer_create(0, c->par.outer_lr, c->par.outer_momentum,
                             (vkg_outer_dtype)c->par.outer_dtype, &o));
    vkg_outer_destroy(&o);
    return VKG_OK;
}

vkg_status vkg_diloco_fragment_ranges(const vkg_model_config *cfg, int F, int p, size_t *ranges,
                                      int *nranges)
{
    int L = cfg->num_layers;
    VKG_CHECK(F >= 1 && F <= L && p >= 0 && p < F, VKG_ERR_INVALID_ARG,
              "--fragments %d: 1 to the model's %d layers (each fragment holds whole layers)", F,
              L);
    vkg_param_table t;
    vkg_model_params(cfg, &t);
    int k = 0;
    for (int i = 0; i < t.n; i++) {
        const vkg_param_info *x = &t.t[i];
        size_t first = 0, count = 0;
        if (x->place == VKG_PARAM_LAYER) { /* the layers l with l % F == p */
            size_t per = x->count / (size_t)L;
            for (int l = p; l < L; l += F) {
                if (ranges)
                    ranges[2 * k] = x->offset + (size_t)l * per, ranges[2 * k + 1] = per;
                k++;
            }
            continue;
        }
        if (x->rows > 1) { /* a matrix's rows, cut in F */
            size_t rows = (size_t)x->rows, cols = (size_t)x->cols;
            first = rows * (size_t)p / (size_t)F * cols;
            count = rows * (size_t)(p + 1) / (size_t)F * cols - first;
        } else if (p == (x->place == VKG_PARAM_EMBED ? 0 : (L - 1) % F)) {
            count = x->count; /* a vector: with the first layer (embeddings) or the last (head) */
        }
        if (count) {
            if (ranges)
                ranges[2 * k] = x->offset + first, ranges[2 * k + 1] = count;
            k++;
        }
    }
    *nranges = k;
    return VKG_OK;
}

/* Whole-model ranges (first, count pairs, each inside one tensor) as ranges of the part lo
 * holds, in the same order (those outside it dropped); their number. */
static int part_ranges(const vkg_model_layout *lo, const size_t *whole, int nwhole, size_t *out)
{
    int k = 0;
    for (int j = 0; j < nwhole; j++) {
        size_t a = whole[2 * j], b = a + whole[2 * j + 1];
        for (int i = 0; i < lo->n; i++) {
            size_t ta = lo->whole_offset[i], tb = ta + lo->count[i];
            size_t x = a > ta ? a : ta, y = b < tb ? b : tb;
            if (x < y)
                out[2 * k] = lo->part_offset[i] + (x - ta), out[2 * k + 1] = y - x, k++;
        }
    }
    return k;
}

/* Fragment p's ranges of this rank's part (the whole model's without pipelines). */
static vkg_status frag_ranges(vkg_strategy *s, vkg_diloco *d, int p, frag *f)
{
    const vkg_model_layout *lo = vkg_model_layout_of(s->model);
    int nw = 1;
    size_t one[2] = {0, vkg_model_num_params(&s->mc.cfg)}, *whole = one;
    if (d->F > 1) {
        VKG_TRY(vkg_diloco_fragment_ranges(&s->mc.cfg, d->F, p, NULL, &nw));
        whole = malloc(2 * (size_t)nw * sizeof *whole);
        VKG_CHECK(whole, VKG_ERR_NOMEM, "no memory for a fragment");
        vkg_status st = vkg_diloco_fragment_ranges(&s->mc.cfg, d->F, p, whole, &nw);
        if (st != VKG_OK) {
            free(whole);
            return st;
        }
    }
    /* a whole range meets at most every tensor of the part */
    f->ranges = malloc(2 * (size_t)nw * (size_t)lo->n * sizeof *f->ranges);
    if (f->ranges)
        f->nranges = part_ranges(lo, whole, nw, f->ranges);
    if (whole != one)
        free(whole);
    VKG_CHECK(f->ranges, VKG_ERR_NOMEM, "no memory for a fragment");
    for (int k = 0; k < f->nranges; k++)
        f->n += f->ranges[2 * k + 1];
    /* under pipelines the tied embedding's share leads the fragment (it is the part's first) */
    if (d->S > 1 && lo->tied && f->nranges && f->ranges[0] < lo->tied)
        f->tied = f->ranges[1];
    return VKG_OK;
}

vkg_status vkg__diloco_build(vkg_strategy *s)
{
    vkg_diloco *d = calloc(1, sizeof *d);
    VKG_CHECK(d, VKG_ERR_NOMEM, "no memory for DiLoCo's state");
    s->diloco = d;
    d->n = vkg_model_layout_of(s->model)->total;
    d->host = malloc(d->n * sizeof *d->host);
    VKG_CHECK(d->host, VKG_ERR_NOMEM, "no memory for %zu parameters", d->n);
    d->F = fragments_of(&s->cfg), d->delay = delay_of(&s->cfg), d->H = s->cfg.par.inner_steps;
    d->mix = d->delay ? s->cfg.par.outer_mix : 0.0f;
    d->dt = (vkg_outer_dtype)s->cfg.par.outer_dtype;
    d->S = vkg_job_pp(s->job);
    d->group = vkg_job_dp_group(s->job);
    VKG_CHECK(d->S == 1 || (d->group && !d->delay), VKG_ERR_STATE, "DiLoCo under pipelines: %s",
              d->group ? "a delay" : "no data-parallel group");
    d->stage_lo = calloc((size_t)d->S, sizeof *d->stage_lo);
    d->frags = calloc((size_t)d->F, sizeof *d->frags);
    d->pieces = calloc((size_t)d->F, sizeof *d->pieces);
    VKG_CHECK(d->frags && d->pieces && d->stage_lo, VKG_ERR_NOMEM, "no memory for %d fragments",
              d->F);
    for (int st = 0; st < d->S; st++) {
        VKG_TRY(vkg__stage_layout(s, st, &d->stage_lo[st]));
        d->max_part = d->stage_lo[st].total > d->max_part ? d->stage_lo[st].total : d->max_part;
    }
    for (int p = 0; p < d->F; p++) {
        frag *f = &d->frags[p];
        VKG_TRY(frag_ranges(s, d, p, f));
        f->offset = (int)((long long)(p + 1) * d->H / d->F % d->H);
        f->buf = malloc((f->n ? f->n : 1) * sizeof *f->buf);
        VKG_CHECK(f->buf, VKG_ERR_NOMEM, "no memory for a fragment of %zu parameters", f->n);
        VKG_TRY(vkg_outer_create(f->n, s->cfg.par.outer_lr, s->cfg.par.outer_momentum,
                                 (vkg_outer_dtype)s->cfg.par.outer_dtype, &f->outer));
    }
    return VKG_OK;
}

/* The fragment's ranges of whole (n floats) to or from its packed vector x. */
static void frag_gather(const frag *f, const float *whole, float *x)
{
    for (int k = 0; k < f->nranges; k++, x += f->ranges[2 * k - 1])
        memcpy(x, whole + f->ranges[2 * k], f->ranges[2 * k + 1] * sizeof *x);
}

static void frag_scatter(const frag *f, const float *x, float *whole)
{
    for (int k = 0; k < f->nranges; k++, x += f->ranges[2 * k - 1])
        memcpy(whole + f->ranges[2 * k], x, f->ranges[2 * k + 1] * sizeof *x);
}

vkg_status vkg__diloco_start(vkg_strategy *s, const float *params)
{
    vkg_diloco *d = s->diloco;
    for (int p = 0; p < d->F; p++) {
        frag *f = &d->frags[p];
        frag_gather(f, params, vkg_outer_global(f->outer));
        memset(vkg_outer_momentum(f->outer), 0, f->n * sizeof(float));
        f->t0 = 0;
    }
    return VKG_OK;
}

/* Piece k of the delay's pieces of fragment f's exchange: cut at multiples of the int8 chunk, so
 * that the pieces exchange what the whole would (outer.h). */
static void piece_of(const vkg_diloco *d, const frag *f, int k, size_t *first, size_t *count)
{
    size_t chunks = vkg_outer_int8_chunks(f->n);
    size_t a = chunks * (size_t)k / (size_t)d->delay * VKG_OUTER_INT8_CHUNK;
    size_t b = chunks * (size_t)(k + 1) / (size_t)d->delay * VKG_OUTER_INT8_CHUNK;
    a = a < f->n ? a : f->n, b = b < f->n ? b : f->n;
    *first = a, *count = b - a;
}

/* The pieces of the step that runs now (the job's background exchange): their time and bytes
 * into d. */
static vkg_status exchange_pieces(void *arg)
{
    vkg_diloco *d = arg;
    double t0 = vkg_os_now_ms();
    vkg_status st = VKG_OK;
    for (int i = 0; i < d->npieces && st == VKG_OK; i++) {
        const piece *pc = &d->pieces[i];
        frag *f = &d->frags[pc->f];
        st = vkg_outer_exchange(f->outer, d->group, f->buf, pc->first, pc->count);
        if (st == VKG_OK)
            d->worker_bytes += vkg_outer_payload_bytes(pc->count, d->dt);
    }
    d->worker_ms = vkg_os_now_ms() - t0;
    return st;
}

/* Wait for the pieces (the job's background exchange, if any runs): their time and bytes into
 * out (may be NULL), the wait as exposed communication. Their failure is this call's, with its
 * message; a job call that waited for them first had it already. */
static vkg_status join_pieces(vkg_strategy *s, vkg_strategy_step_out *out)
{
    vkg_diloco *d = s->diloco;
    double waited;
    vkg_status st = vkg_job_settle(s->job, &waited);
    if (out && d->npieces) {
        out->comm_ms += d->worker_ms, out->exposed_comm_ms += waited;
        out->outer_bytes += d->worker_bytes, out->outer_ms += d->worker_ms;
    }
    d->npieces = 0;
    return st;
}

vkg_status vkg__diloco_join(vkg_strategy *s, vkg_strategy_step_out *out)
{
    return join_pieces(s, out);
}

static int in_flight(const vkg_diloco *d, const frag *f, uint32_t t)
{
    return f->t0 && t < f->t0 + (uint32_t)d->delay;
}

/* After optimizer step t: the fragments whose delayed exchange has ended take their outer step
 * and are merged into this replica (mix of its own, 1 - mix of the global parameters), those
 * whose round ends start theirs (with no delay: exchanged, stepped and taken at once), and the
 * pieces of the exchanges in flight for the next step go to the worker. */
/* Fragment f's blocking exchange over the data-parallel group (pipelines: the tied embedding's
 * share on its own, f->tied; 0 for whole models). */
static vkg_status exchange_now(vkg_diloco *d, frag *f)
{
    if (f->tied)
        VKG_TRY(vkg_outer_exchange(f->outer, d->group, f->buf, 0, f->tied));
    return vkg_outer_exchange(f->outer, d->group, f->buf, f->tied, f->n - f->tied);
}

static int all_finite(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

/* Fragment f's outer update from the exchanged sums in buf, into buf (the new global
 * parameters); 0 and nothing updated when a sum is not finite (a replica diverged without a
 * skipped step, or the sum overflowed: the same sums, so the same answer, on every rank), buf
 * then the global parameters as they were. */
static int outer_update(frag *f, int N)
{
    if (!all_finite(f->buf, f->n)) {
        memcpy(f->buf, vkg_outer_global(f->outer), f->n * sizeof *f->buf);
        return 0;
    }
    vkg_outer_update(f->outer, N, f->buf);
    return 1;
}

vkg_status vkg__diloco_end_step(vkg_strategy *s, uint32_t t, vkg_strategy_step_out *out)
{
    vkg_diloco *d = s->diloco;
    int N = vkg_job_dp(s->job), lands = 0, starts = 0;
    for (int p = 0; p < d->F; p++) {
        frag *f = &d->frags[p];
        f->tainted |= out->skipped;
        lands |= f->t0 && t == f->t0 + (uint32_t)d->delay;
        starts |= (int)(t % (uint32_t)d->H) == f->offset;
    }
    if (lands || starts)
        VKG_TRY(vkg_model_get_params(s->model, d->host));
    for (int p = 0; p < d->F && lands; p++) {
        frag *f = &d->frags[p];
        if (!(f->t0 && t == f->t0 + (uint32_t)d->delay))
            continue;
        /* buf: the new global parameters (or the old ones); a replica that skipped a step since
         * its exchange started takes them whole: its own may have diverged */
        int updated = outer_update(f, N);
        const float *g = f->buf;
        float a = updated && !f->tainted ? d->mix : 0.0f, b = 1.0f - a;
        for (int k = 0, at = 0; k < f->nranges; k++) {
            float *h = d->host + f->ranges[2 * k];
            for (size_t i = 0; i < f->ranges[2 * k + 1]; i++, at++)
                h[i] = a == 0.0f ? g[at] : a * h[i] + b * g[at];
        }
        f->t0 = 0, f->tainted = 0;
        out->outer |= updated, out->outer_skipped |= !updated;
    }
    for (int p = 0; p < d->F && starts; p++) {
        frag *f = &d->frags[p];
        if ((int)(t % (uint32_t)d->H) != f->offset)
            continue;
        if (f->tainted) { /* no exchange: the global parameters stay, every replica takes them */
            frag_scatter(f, vkg_outer_global(f->outer), d->host);
            f->tainted = 0;
            out->outer_skipped = 1;
            continue;
        }
        frag_gather(f, d->host, f->buf);
        if (d->delay) {
            f->t0 = t;
            continue;
        }
        double t0 = vkg_os_now_ms();
        VKG_TRY(exchange_now(d, f));
        int updated = outer_update(f, N);
        double ms = vkg_os_now_ms() - t0;
        out->comm_ms += ms, out->exposed_comm_ms += ms, out->outer_ms += ms;
        out->outer_bytes += vkg_outer_payload_bytes(f->n, (vkg_outer_dtype)s->cfg.par.outer_dtype);
        frag_scatter(f, f->buf, d->host);
        out->outer |= updated, out->outer_skipped |= !updated;
    }
    if (lands || starts)
        VKG_TRY(vkg_model_set_params(s->model, d->host));
    /* the next step's pieces: piece t - t0 of every exchange in flight */
    d->npieces = 0;
    for (int p = 0; p < d->F; p++) {
        frag *f = &d->frags[p];
        if (!in_flight(d, f, t))
            continue;
        piece *pc = &d->pieces[d->npieces++];
        pc->f = p;
        piece_of(d, f, (int)(t - f->t0), &pc->first, &pc->count);
    }
    if (!d->npieces)
        return VKG_OK;
    d->worker_ms = 0.0, d->worker_bytes = 0;
    int ran;
    double t0 = vkg_os_now_ms();
    vkg_status st = vkg_job_background(s->job, exchange_pieces, d, &ran);
    if (ran) { /* no thread: the pieces ran now, exposed */
        double ms = vkg_os_now_ms() - t0;
        out->comm_ms += ms, out->exposed_comm_ms += ms, out->outer_ms += ms;
        out->outer_bytes += d->worker_bytes;
        d->npieces = 0;
    }
    return st;
}

size_t vkg__diloco_host_bytes(const vkg_strategy *s)
{
    const vkg_diloco *d = s->diloco;
    if (!d)
        return 0;
    vkg_outer_dtype dt = (vkg_outer_dtype)s->cfg.par.outer_dtype;
    size_t N = (size_t)vkg_job_dp(s->job), largest = 0;
    for (int p = 0; p < d->F; p++)
        largest = d->frags[p].n > largest ? d->frags[p].n : largest;
    size_t gathered = dt == VKG_OUTER_F32 ? 0 : N * (size_t)vkg_outer_payload_bytes(largest, dt);
    /* g, momentum, the exchanges' buffers, the replica's parameters */
    return 4 * d->n * sizeof(float) + gathered;
}

/* Floats per parameter of the outer state: g and m, then each other replica's parameters, m and
 * v; with a delay, every replica's exchange buffers too (rank 0's after m, the others' after
 * their v). */
static size_t state_per_param(const vkg_diloco *d, int N)
{
    return d->delay ? 3 + 4 * (size_t)(N - 1) : 2 + 3 * (size_t)(N - 1);
}

size_t vkg__diloco_state_count(const vkg_strategy *s)
{
    const vkg_diloco *d = s->diloco;
    return d ? vkg_model_num_params(&s->mc.cfg) * state_per_param(d, vkg_job_dp(s->job)) : 0;
}

/* Room for one replica's moments and exchanges in flight on the host (this rank's part). */
static vkg_status need_moments(vkg_diloco *d)
{
    if (!d->hm)
        d->hm = malloc(d->n * sizeof *d->hm);
    if (!d->hv)
        d->hv = malloc(d->n * sizeof *d->hv);
    if (!d->hf)
        d->hf = malloc(d->n * sizeof *d->hf);
    VKG_CHECK(d->hm && d->hv && d->hf, VKG_ERR_NOMEM, "no memory for %zu moments", d->n);
    return VKG_OK;
}

/* The exchanges in flight of this replica as a vector of its part (zeros elsewhere), or back. */
static void flight_out(const vkg_diloco *d, uint32_t t, float *whole)
{
    memset(whole, 0, d->n * sizeof *whole);
    for (int p = 0; p < d->F; p++)
        if (in_flight(d, &d->frags[p], t))
            frag_scatter(&d->frags[p], d->frags[p].buf, whole);
}

static void flight_in(vkg_diloco *d, uint32_t t, const float *whole)
{
    for (int p = 0; p < d->F; p++)
        if (in_flight(d, &d->frags[p], t))
            frag_gather(&d->frags[p], whole, d->frags[p].buf);
}

/* Where the global parameters and the momentum (vectors of the part) come from and go to. */
static void outer_out(const vkg_diloco *d, float *g, float *m)
{
    for (int p = 0; p < d->F; p++) {
        frag_scatter(&d->frags[p], vkg_outer_global(d->frags[p].outer), g);
        frag_scatter(&d->frags[p], vkg_outer_momentum(d->frags[p].outer), m);
    }
}

static void outer_in(vkg_diloco *d, const float *g, const float *m)
{
    for (int p = 0; p < d->F; p++) {
        frag_gather(&d->frags[p], g, vkg_outer_global(d->frags[p].outer));
        frag_gather(&d->frags[p], m, vkg_outer_momentum(d->frags[p].outer));
    }
}

/* The fragments' exchanges that started at or before step t and end after it (every rank the
 * same: the schedule is the step count's). */
static void restore_schedule(vkg_diloco *d, uint32_t t)
{
    for (int p = 0; p < d->F; p++) {
        frag *f = &d->frags[p];
        f->t0 = 0;
        if (!d->delay || t < 1)
            continue;
        /* the last start at or before t: t0 % H == offset, t0 >= 1 */
        long long back = (((long long)t - f->offset) % d->H + d->H) % d->H;
        long long t0 = (long long)t - back;
        if (t0 >= 1 && t < t0 + d->delay)
            f->t0 = (uint32_t)t0;
    }
}

/* Where block k of replica r's outer state lies in the checkpoint's buf (n: the whole model's
 * parameters): replica 0's g, m and (delay) exchanges in flight, then each other replica's
 * parameters, m, v and (delay) exchanges in flight. */
static size_t state_at(const vkg_diloco *d, size_t n, int N, int r, int k)
{
    size_t own = d->delay ? 3 : 2, each = (state_per_param(d, N) - own) / (size_t)(N - 1);
    return n * (r == 0 ? (size_t)k : own + each * (size_t)(r - 1) + (size_t)k);
}

static int state_blocks(const vkg_diloco *d, int r)
{
    return (r == 0 ? 2 : 3) + (d->delay ? 1 : 0);
}

/* Stage `stage`'s block x (its part) into the whole-model vector at whole. Under pipelines the
 * last stage's blocks come first; stage 0's tied embedding must then equal the copy already there.
 */
static vkg_status insert_block(const vkg_diloco *d, int stage, int r, int k, const float *x,
                               float *whole)
{
    const vkg_model_layout *lo = &d->stage_lo[stage];
    size_t w = lo->tied;
    if (d->S > 1 && stage == 0 && memcmp(whole, x, w * sizeof *x)) {
        size_t i = 0;
        while (!memcmp(&whole[i], &x[i], sizeof *x))
            i++;
        return VKG_FAIL(VKG_ERR_STATE,
                        "DiLoCo under pipelines: replica %d's copies of the tied embedding differ "
                        "between stage 0 and stage %d (outer state block %d, element %zu: %.9g "
                        "vs %.9g)",
                        r, d->S - 1, k, i, (double)x[i], (double)whole[i]);
    }
    vkg_model_part_insert(lo, x, whole);
    return VKG_OK;
}

/* This rank's blocks (vectors of its part): replica 0's g, m and exchanges in flight, another
 * replica's parameters, m, v and exchanges in flight. */
static vkg_status own_blocks(vkg_strategy *s, vkg_diloco *d, uint32_t t, float **blk)
{
    VKG_TRY(need_moments(d));
    if (vkg_job_replica(s->job) == 0) {
        outer_out(d, d->hm, d->hv);
        blk[0] = d->hm, blk[1] = d->hv, blk[2] = d->hf;
    } else {
        VKG_TRY(vkg_model_get_params(s->model, d->host));
        VKG_TRY(vkg_adamw_get_moments(s->opt, d->hm, d->hv));
        blk[0] = d->host, blk[1] = d->hm, blk[2] = d->hv, blk[3] = d->hf;
    }
    if (d->delay)
        flight_out(d, t, blk[state_blocks(d, vkg_job_replica(s->job)) - 1]);
    return VKG_OK;
}

vkg_status vkg__diloco_state_gather(vkg_strategy *s, float *buf, uint32_t t)
{
    vkg_diloco *d = s->diloco;
    VKG_TRY(join_pieces(s, NULL)); /* the step's piece, done: the state holds it */
    vkg_comm_t *comm = vkg_job_comm(s->job);
    const vkg_job_layout *lay = vkg_job_layout_get(s->job);
    int N = lay->dp;
    float *blk[4];
    VKG_TRY(own_blocks(s, d, t, blk));
    if (lay->rank != 0) { /* every rank's part to rank 0 */
        for (int k = 0; k < state_blocks(d, lay->replica); k++)
            VKG_TRY(vkg_comm_send(comm, 0, TAG_OUTER_STATE | (uint32_t)k, blk[k], d->n * 4));
        return VKG_OK;
    }
    size_t n = vkg_model_num_params(&s->mc.cfg);
    float *tmp = malloc(d->max_part * sizeof *tmp);
    VKG_CHECK(tmp, VKG_ERR_NOMEM, "no memory for %zu parameters", d->max_part);
    vkg_status st = VKG_OK;
    for (int stage = d->S - 1; st == VKG_OK && stage >= 0;
         stage--) /* stage 0's tied embedding last */
        for (int r = 0; st == VKG_OK && r < N; r++) {
            int q = vkg_job_rank_of(lay, stage, r);
            for (int k = 0; st == VKG_OK && k < state_blocks(d, r); k++) {
                if (q != 0)
                    st = vkg_comm_recv(comm, q, TAG_OUTER_STATE | (uint32_t)k, tmp,
                                       d->stage_lo[stage].total * 4);
                if (st == VKG_OK)
                    st = insert_block(d, stage, r, k, q ? tmp : blk[k],
                                      buf + state_at(d, n, N, r, k));
            }
        }
    free(tmp);
    return st;
}

vkg_status vkg__diloco_state_load(vkg_strategy *s, const float *buf, uint32_t t)
{
    vkg_diloco *d = s->diloco;
    VKG_TRY(join_pieces(s, NULL));
    vkg_comm_t *comm = vkg_job_comm(s->job);
    const vkg_job_layout *lay = vkg_job_layout_get(s->job);
    int N = lay->dp, r = lay->replica;
    VKG_TRY(need_moments(d));
    restore_schedule(d, t);
    /* Every rank's messages from rank 0: g and m, then its replica's blocks but replica 0's
     * parameters and moments (model.bin's and state.bin's), all of its part. */
    if (lay->rank == 0) {
        size_t n = vkg_model_num_params(&s->mc.cfg);
        float *tmp = malloc(d->max_part * sizeof *tmp);
        VKG_CHECK(tmp, VKG_ERR_NOMEM, "no memory for %zu parameters", d->max_part);
        vkg_status st = VKG_OK;
        for (int stage = 0; st == VKG_OK && stage < d->S; stage++)
            for (int q = 0; st == VKG_OK && q < N; q++) {
                int to = vkg_job_rank_of(lay, stage, q);
                if (to == 0)
                    continue;
                const vkg_model_layout *lo = &d->stage_lo[stage];
                const float *from[6];
                int nf = 0;
                from[nf++] = buf + state_at(d, n, N, 0, 0);
                from[nf++] = buf + state_at(d, n, N, 0, 1);
                for (int k = 0; q && k < 3; k++)
                    from[nf++] = buf + state_at(d, n, N, q, k);
                if (d->delay)
                    from[nf++] = buf + state_at(d, n, N, q, q ? 3 : 2);
                for (int i = 0; st == VKG_OK && i < nf; i++) {
                    vkg_model_part_extract(lo, from[i], tmp);
                    st = vkg_comm_send(comm, to, TAG_OUTER_STATE | (uint32_t)i, tmp, lo->total * 4);
                }
            }
        if (st == VKG_OK) { /* its own */
            const vkg_model_layout *lo = &d->stage_lo[0];
            vkg_model_part_extract(lo, buf + state_at(d, n, N, 0, 0), d->hm);
            vkg_model_part_extract(lo, buf + state_at(d, n, N, 0, 1), d->hv);
            outer_in(d, d->hm, d->hv);
            if (d->delay) {
                vkg_model_part_extract(lo, buf + state_at(d, n, N, 0, 2), d->hf);
                flight_in(d, t, d->hf);
            }
        }
        free(tmp);
        return st;
    }
    size_t bytes = d->n * 4;
    uint32_t tag = 0;
    VKG_TRY(vkg_comm_recv(comm, 0, TAG_OUTER_STATE | tag++, d->hm, bytes));
    VKG_TRY(vkg_comm_recv(comm, 0, TAG_OUTER_STATE | tag++, d->hv, bytes));
    outer_in(d, d->hm, d->hv);
    if (r != 0) {
        VKG_TRY(vkg_comm_recv(comm, 0, TAG_OUTER_STATE | tag++, d->host, bytes));
        VKG_TRY(vkg_comm_recv(comm, 0, TAG_OUTER_STATE | tag++, d->hm, bytes));
        VKG_TRY(vkg_comm_recv(comm, 0, TAG_OUTER_STATE | tag++, d->hv, bytes));
        VKG_TRY(vkg_model_set_params(s->model, d->host));
        VKG_TRY(vkg_adamw_set_moments(s->opt, d->hm, d->hv));
    }
    if (d->delay) {
        VKG_TRY(vkg_comm_recv(comm, 0, TAG_OUTER_STATE | tag++, d->hf, bytes));
        flight_in(d, t, d->hf);
    }
    return VKG_OK;
}

void vkg__diloco_free(vkg_strategy *s)
{
    vkg_diloco *d = s->diloco;
    if (!d)
        return;
    (void)join_pieces(s, NULL); /* the pieces end (or fail) with the peers' */
    for (int p = 0; d->frags && p < d->F; p++) {
        vkg_outer_destroy(&d->frags[p].outer);
        free(d->frags[p].ranges), free(d->frags[p].buf);
    }
    free(d->frags), free(d->pieces);
    free(d->host), free(d->hm), free(d->hv), free(d->hf), free(d->stage_lo);
    free(d);
    s->diloco = NULL;
}

/* Whole-model replicas: every call the whole-model default; the rounds are the step's end
 * (step.c), built by vkg_strategy_build. */
const vkg_strategy_vt vkg__strategy_diloco = {.name = "diloco"};
