/* `vkgpt bench pp`: pipeline schedules measured. For each number of stages S and micro-batches M
 * and each schedule, S ranks (threads of this process, each with its own trainer and device,
 * joined by the inproc transport) train a fixed model; averaged over the measured steps it prints
 * per stage the forward and backward compute time (busy) and the rest of the schedule's frame, from
 * the first forward on any stage to the last backward on any stage (idle: waiting for other
 * stages, and moving activations), the measured bubble idle / frame beside the theory
 * ((S - 1) / (M + S - 1) for 1F1B and GPipe; for ZB-H1 (S - 1)(F + B - W) over M(F + B + W) plus
 * that, with the run's mean pass times, printed above its rows), the stage's activation memory
 * and the mean step time. With --svg and --trace it draws the last step of each run (one row per
 * stage, F, B and W blocks) and writes its timeline as Chrome trace-event JSON. Prints figures,
 * asserts nothing. For one core per rank, run it with LP_NUM_THREADS=1 (lavapipe's threads per
 * device). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/file.h"
#include "cli/bench_ranks.h"
#include "cli/cli.h"
#include "cli/flags.h"
#include "vkgpt/comm.h"
#include "vkgpt/train.h"

#define MAX_STAGES 8
#define MAX_SPANS 4096

typedef struct pp_cfg {
    int layers, heads, channels, vocab, seq, batch, steps, warmup;
    const char *device, *svg, *trace;
    char data[600];
} pp_cfg;

typedef struct pp_rank {
    const pp_cfg *b;
    int rank, S, M, schedule;
    uint64_t job_id;
    vkg_comm_ctx_t *ctx;
    vkg_status st;
    char err[512];
    double step_ms; /* mean over the measured steps */
    /* per measured step: this rank's first forward start, last backward end, compute time */
    double first_t[64], last_t[64], busy_t[64];
    double pass_ms[3]; /* forwards, backwards (input passes), weight passes: summed, measured */
    int passes[3];
    int measured;
    size_t act_bytes;
    int first, last;
    vkg_span spans[MAX_SPANS]; /* the last step's */
    int nspans;
} pp_rank;

static const char *const sched_names[] = {"1f1b", "gpipe", "zb-h1"}; /* VKG_PP_* order */
enum { NSCHED = 3 };

/* Compute spans: forwards, backwards and (ZB-H1) weight passes. */
static int compute_span(vkg_span_kind k)
{
    return k == VKG_SPAN_FORWARD || k == VKG_SPAN_BACKWARD || k == VKG_SPAN_WEIGHT;
}

static void *bench_rank(void *p)
{
    pp_rank *j = p;
    const pp_cfg *b = j->b;
    vkg_train_config c = vkg_train_config_default();
    c.device = b->device;
    c.layers = b->layers, c.heads = b->heads, c.channels = b->channels;
    c.max_seq_len = b->seq, c.vocab_size = b->vocab, c.data = b->data;
    c.batch = b->batch, c.seq = b->seq, c.steps = b->steps + b->warmup;
    c.total_batch = (long long)j->M * b->batch * b->seq;
    c.lr = 1e-4f, c.schedule = VKG_SCHEDULE_CONSTANT;
    c.par.comm.world_size = j->S, c.par.comm.rank = j->rank, c.par.comm.transport = VKG_COMM_INPROC;
    c.par.comm.job_id = j->job_id, c.par.comm.ctx = j->ctx;
    c.par.pp = j->S, c.par.pp_schedule = j->schedule;
    vkg_trainer_t *t = NULL;
    vkg_status st = vkg_trainer_create(&c, &t);
    int measured = 0;
    for (int s = 0; st == VKG_OK && s < b->steps + b->warmup; s++) {
        vkg_step_info info;
        st = vkg_trainer_step(t, &info);
        if (st == VKG_OK && s >= b->warmup) {
            j->step_ms += info.ms;
            const vkg_span *sp;
            int n = vkg_trainer_spans(t, &sp), k = measured < 64 ? measured : 63;
            j->first_t[k] = 1e300, j->last_t[k] = -1e300, j->busy_t[k] = 0.0;
            for (int i = 0; i < n; i++)
                if (compute_span(sp[i].kind)) {
                    j->first_t[k] = sp[i].t0 < j->first_t[k] ? sp[i].t0 : j->first_t[k];
                    j->last_t[k] = sp[i].t1 > j->last_t[k] ? sp[i].t1 : j->last_t[k];
                    j->busy_t[k] += sp[i].t1 - sp[i].t0;
                    int w = sp[i].kind == VKG_SPAN_FORWARD    ? 0
                            : sp[i].kind == VKG_SPAN_BACKWARD ? 1
                                                              : 2;
                    j->pass_ms[w] += sp[i].t1 - sp[i].t0, j->passes[w]++;
                }
            measured++;
        }
    }
    if (st == VKG_OK) {
        const vkg_span *sp;
        int n = vkg_trainer_spans(t, &sp);
        j->nspans = n < MAX_SPANS ? n : MAX_SPANS;
        memcpy(j->spans, sp, (size_t)j->nspans * sizeof *sp);
        vkg_trainer_info info;
        vkg_trainer_get_info(t, &info);
        j->act_bytes = info.activation_bytes, j->first = info.first_layer,
        j->last = info.last_layer;
    }
    if (measured)
        j->step_ms /= measured;
    j->measured = measured < 64 ? measured : 64;
    if (st != VKG_OK)
        vkg_cli_bench_rank_error(j->err, sizeof j->err);
    j->st = st;
    vkg_trainer_destroy(&t);
    return NULL;
}

/* The last step's schedule as an SVG: a row per stage, forward blocks in blue, backward in orange
 * and weight passes in green (labelled with the micro-batch), time left to right from the first
 * span. */
static int write_svg(const char *path, const pp_rank *r, int S)
{
    double t0 = 1e300, t1 = -1e300;
    for (int s = 0; s < S; s++)
        for (int i = 0; i < r[s].nspans; i++)
            if (compute_span(r[s].spans[i].kind)) {
                t0 = r[s].spans[i].t0 < t0 ? r[s].spans[i].t0 : t0;
                t1 = r[s].spans[i].t1 > t1 ? r[s].spans[i].t1 : t1;
            }
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "vkgpt bench pp: cannot write %s\n", path);
        return 1;
    }
    double W = 1000.0, row = 28.0, x0 = 70.0, scale = t1 > t0 ? W / (t1 - t0) : 1.0;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "font-family=\"sans-serif\" font-size=\"11\">\n",
            W + x0 + 20, row * S + 40);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">%.1f ms</text>\n", x0 + W - 40, row * S + 30, t1 - t0);
    for (int s = 0; s < S; s++) {
        double y = 10 + row * s;
        fprintf(f, "<text x=\"4\" y=\"%.1f\">stage %d</text>\n", y + 16, s);
        for (int i = 0; i < r[s].nspans; i++) {
            const vkg_span *sp = &r[s].spans[i];
            if (!compute_span(sp->kind))
                continue;
            int fw = sp->kind == VKG_SPAN_FORWARD, wt = sp->kind == VKG_SPAN_WEIGHT;
            double x = x0 + (sp->t0 - t0) * scale, w = (sp->t1 - sp->t0) * scale;
            fprintf(f,
                    "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\" "
                    "stroke=\"white\" stroke-width=\"0.5\"/>\n",
                    x, y, w > 0.5 ? w : 0.5, row - 6,
                    fw   ? "#4a7fd4"
                    : wt ? "#3c9a5f"
                         : "#e08a3c");
            if (w > 14)
                fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" fill=\"white\">%c%d</text>\n", x + 2,
                        y + 15,
                        fw   ? 'F'
                        : wt ? 'W'
                             : 'B',
                        sp->micro);
        }
    }
    fprintf(f, "</svg>\n");
    return fclose(f) == 0 ? 0 : 1;
}

/* Every rank's last-step spans as one Chrome trace (process = stage). */
static int write_trace(const char *path, const pp_rank *r, int S)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "vkgpt bench pp: cannot write %s\n", path);
        return 1;
    }
    double origin = 1e300;
    for (int s = 0; s < S; s++)
        for (int i = 0; i < r[s].nspans; i++)
            origin = r[s].spans[i].t0 < origin ? r[s].spans[i].t0 : origin;
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    int first = 1;
    for (int s = 0; s < S; s++)
        for (int i = 0; i < r[s].nspans; i++) {
            const vkg_span *sp = &r[s].spans[i];
            fprintf(f,
                    "%s{\"name\": \"%s %d\", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %.1f, "
                    "\"dur\": %.1f, \"pid\": %d, \"tid\": 0}",
                    first ? "" : ",\n", vkg_span_kind_name(sp->kind), sp->micro,
                    vkg_span_kind_name(sp->kind), (sp->t0 - origin) * 1e3, (sp->t1 - sp->t0) * 1e3,
                    s);
            first = 0;
        }
    fprintf(f, "\n]}\n");
    return fclose(f) == 0 ? 0 : 1;
}

static int run_config(const pp_cfg *b, int S, int M, int schedule)
{
    static uint64_t counter;
    pp_rank *r = calloc((size_t)S, sizeof *r);
    vkg_comm_ctx_t *ctx = NULL;
    if (!r || vkg_comm_ctx_create(&ctx) != VKG_OK) {
        free(r);
        return vkg_cli_report("bench pp", VKG_ERR_NOMEM);
    }
    uint64_t job_id = ((uint64_t)vkg_os_pid() << 20) + ++counter;
    for (int s = 0; s < S; s++) {
        r[s] = (pp_rank){
            .b = b, .rank = s, .S = S, .M = M, .schedule = schedule, .job_id = job_id, .ctx = ctx};
    }
    vkg_status st = vkg_cli_bench_run_ranks("bench", S, r, sizeof *r, bench_rank);
    vkg_comm_ctx_destroy(&ctx);
    if (st != VKG_OK) {
        free(r);
        return vkg_cli_report("bench pp", st);
    }
    int rc = 0;
    for (int s = 0; s < S && rc == 0; s++)
        if (r[s].st != VKG_OK) {
            fprintf(stderr, "vkgpt bench pp: S=%d M=%d %s, stage %d: %s\n", S, M,
                    sched_names[schedule], s, r[s].err);
            rc = vkg_cli_exit_code(r[s].st);
        }
    /* Each measured step's frame: from the first forward on any stage to the last backward on
     * any stage (the frame the theory counts); each stage's busy time is its forwards and
     * backwards in it, the rest of the frame its idle time; bubbles are averaged over the
     * measured steps. */
    /* The theory with passes of the measured mean times (all stages): (S - 1)(F + B) of a
     * frame of M(F + B) + (S - 1)(F + B) for 1F1B and GPipe, whatever F and B are; for ZB-H1
     * the idle time (S - 1)(F + B - W) (none when W >= F + B) of M(F + B + W) plus it. */
    double ms[3] = {0.0, 0.0, 0.0};
    for (int w = 0; w < 3; w++) {
        int cnt = 0;
        for (int s = 0; s < S; s++)
            ms[w] += r[s].pass_ms[w], cnt += r[s].passes[w];
        ms[w] = cnt ? ms[w] / cnt : 0.0;
    }
    double theory = (double)(S - 1) / (double)(M + S - 1);
    if (schedule == 2) {
        double gap = ms[0] + ms[1] > ms[2] ? (S - 1) * (ms[0] + ms[1] - ms[2]) : 0.0;
        double frame = M * (ms[0] + ms[1] + ms[2]) + gap;
        theory = frame > 0.0 ? gap / frame : 0.0;
    }
    printf("# S=%d M=%d %s: mean pass F %.1f ms, B %.1f ms%s", S, M, sched_names[schedule], ms[0],
           ms[1], schedule == 2 ? "" : " (whole backward)\n");
    if (schedule == 2)
        printf(", W %.1f ms\n", ms[2]);
    for (int s = 0; s < S && rc == 0; s++) {
        double busy = 0.0, idle = 0.0, bubble = 0.0;
        for (int k = 0; k < r[0].measured; k++) {
            double f0 = 1e300, f1 = -1e300;
            for (int q = 0; q < S; q++) {
                f0 = r[q].first_t[k] < f0 ? r[q].first_t[k] : f0;
                f1 = r[q].last_t[k] > f1 ? r[q].last_t[k] : f1;
            }
            busy += r[s].busy_t[k], idle += f1 - f0 - r[s].busy_t[k];
            bubble += f1 > f0 ? (f1 - f0 - r[s].busy_t[k]) / (f1 - f0) : 0.0;
        }
        int n = r[0].measured ? r[0].measured : 1;
        printf("%3d %3d %6s %5d  [%2d,%2d) %9.1f %9.1f %8.1f%% %8.1f%% %9.2f %9.1f\n", S, M,
               sched_names[schedule], s, r[s].first, r[s].last, busy / n, idle / n,
               100.0 * bubble / n, 100.0 * theory, (double)r[s].act_bytes / 1048576.0,
               r[s].step_ms);
    }
    char path[700];
    if (rc == 0 && b->svg) {
        snprintf(path, sizeof path, "%s-S%d-M%d-%s.svg", b->svg, S, M, sched_names[schedule]);
        rc = write_svg(path, r, S);
    }
    if (rc == 0 && b->trace) {
        snprintf(path, sizeof path, "%s-S%d-M%d-%s.json", b->trace, S, M, sched_names[schedule]);
        rc = write_trace(path, r, S);
    }
    fflush(stdout);
    free(r);
    return rc;
}

static int write_data(pp_cfg *b, int max_tokens)
{
    size_t n = (size_t)(b->steps + b->warmup + 1) * (size_t)max_tokens + 1;
    return vkg_cli_bench_shard("bench pp", n, b->vocab, b->data, sizeof b->data);
}

/* "all" or a comma list of schedule names into want[NSCHED]; -1 on anything else. */
static int parse_schedules(const char *list, int *want)
{
    if (!strcmp(list, "all")) {
        for (int i = 0; i < NSCHED; i++)
            want[i] = 1;
        return 0;
    }
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        int found = 0;
        for (int i = 0; i < NSCHED; i++)
            if (n == strlen(sched_names[i]) && !strncmp(p, sched_names[i], n))
                want[i] = found = 1;
        if (!found)
            return -1;
        p += n;
        if (*p == ',' && *++p == '\0')
            return -1;
    }
    return 0;
}

int vkg_cli_bench_pp(int argc, char **argv)
{
    pp_cfg b = {.layers = 8,
                .heads = 4,
                .channels = 128,
                .vocab = 257,
                .seq = 64,
                .batch = 4,
                .steps = 3,
                .warmup = 1};
    const char *stages = "2,4", *micro = NULL, *schedule = "all";
    b.device = getenv("VKGPT_DEVICE");
    const vkg_flag flags[] = {
        {"--stages", VKG_FLAG_STR, &stages, "stage counts S to run, e.g. 2,4", 0, 0, 0},
        {"--micro", VKG_FLAG_STR, &micro, "micro-batch counts M (default: S, 2S, 4S)", 0, 0, 0},
        {"--schedule", VKG_FLAG_STR, &schedule, "1f1b, gpipe, zb-h1, a comma list of them, or all",
         0, 0, 0},
        {"--layers", VKG_FLAG_INT, &b.layers, "layers", 0, 1, 256},
        {"--heads", VKG_FLAG_INT, &b.heads, "attention heads", 0, 1, 1000},
        {"--channels", VKG_FLAG_INT, &b.channels, "channels", 0, 1, 65536},
        {"--vocab", VKG_FLAG_INT, &b.vocab, "vocabulary", 0, 2, 65535},
        {"--seq", VKG_FLAG_INT, &b.seq, "sequence length T (also the context)", 0, 1, 65536},
        {"--batch", VKG_FLAG_INT, &b.batch, "rows per micro-batch", 0, 1, 1 << 20},
        {"--steps", VKG_FLAG_INT, &b.steps, "measured steps", 0, 1, 1e6},
        {"--warmup", VKG_FLAG_INT, &b.warmup, "unmeasured steps first", 0, 0, 1e6},
        {"--svg", VKG_FLAG_STR, &b.svg, "draw each run's last step to PREFIX-S<S>-M<M>-<sched>.svg",
         0, 0, 0},
        {"--trace", VKG_FLAG_STR, &b.trace,
         "each run's last step as Chrome trace JSON, PREFIX-S<S>-M<M>-<sched>.json", 0, 0, 0},
        {"--device", VKG_FLAG_STR, &b.device, "device index or name (every rank)", 0, 0, 0},
    };
    int rc = vkg_flags_parse("bench pp", "[options]", flags, (int)(sizeof flags / sizeof flags[0]),
                             argc, argv, NULL, NULL);
    if (rc)
        return rc == 1 ? 0 : 2;
    int want[NSCHED] = {0};
    if (parse_schedules(schedule, want) != 0) {
        fprintf(stderr,
                "vkgpt bench pp: --schedule must be 1f1b, gpipe, zb-h1, a comma list of them or "
                "all, got '%s'\n",
                schedule);
        return 2;
    }
    int ss[MAX_STAGES], ms[16], nm = 0;
    int ns = vkg_flags_int_list(stages, 2, MAX_STAGES, ss, MAX_STAGES);
    if (ns < 0) {
        fprintf(stderr, "vkgpt bench pp: --stages wants counts from 2 to %d, got '%s'\n",
                MAX_STAGES, stages);
        return 2;
    }
    if (micro && (nm = vkg_flags_int_list(micro, 1, 1024, ms, 16)) < 0) {
        fprintf(stderr, "vkgpt bench pp: --micro wants counts from 1 to 1024, got '%s'\n", micro);
        return 2;
    }
    int max_m = 0;
    for (int i = 0; i < ns; i++)
        for (int k = 0; k < (micro ? nm : 3); k++) {
            int M = micro ? ms[k] : ss[i] << k;
            max_m = M > max_m ? M : max_m;
        }
    if ((rc = write_data(&b, max_m * b.batch * b.seq)) != 0)
        return rc;
    const char *lp = getenv("LP_NUM_THREADS");
    printf("# GPT-2 L=%d NH=%d C=%d V=%d, micro-batch B=%d x T=%d, %d measured steps after %d; "
           "ranks are threads with a device each (LP_NUM_THREADS=%s)\n",
           b.layers, b.heads, b.channels, b.vocab, b.batch, b.seq, b.steps, b.warmup,
           lp ? lp : "unset");
    printf("# busy = forward + backward (+ weight pass) compute of the stage; idle = the rest of "
           "the schedule's wall time; bubble = idle / (busy + idle); theory = (S-1)/(M+S-1), "
           "zb-h1 (S-1)(F+B-W) / (M(F+B+W) + (S-1)(F+B-W)) with the measured mean passes; act = "
           "activation slots' memory\n");
    printf("%3s %3s %6s %5s %8s %9s %9s %9s %9s %9s %9s\n", "S", "M", "sched", "stage", "layers",
           "busy_ms", "idle_ms", "bubble", "theory", "act_MiB", "step_ms");
    for (int i = 0; i < ns && rc == 0; i++)
        for (int k = 0; k < (micro ? nm : 3) && rc == 0; k++) {
            int M = micro ? ms[k] : ss[i] << k;
            for (int sch = 0; sch < NSCHED && rc == 0; sch++) {
                if (!want[sch] || (sch != 1 && M < ss[i]))
                    continue; /* 1F1B and ZB-H1 need M >= S */
                rc = run_config(&b, ss[i], M, sch);
            }
        }
    remove(b.data);
    return rc;
}
