/* Tests of src/train/metrics: JSON lines that parse back to the exact float bits, non-finite
 * values written as null and flagged, skipped steps marked, rank/world fields, the SVG loss curve
 * (well-formed, one point per history entry, eval circles, escaped title), and resuming: history
 * reloaded up to the resume step, later and torn lines cut off, malformed logs refused by file and
 * line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os/file.h"
#include "train/metrics.h"
#include "vkgpt/status.h"
#include "testutil.h"

typedef struct fixture {
    char dir[64], log[128], svg[128];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/vkg_test_metrics_XXXXXX");
    if (!f || vkg_os_mkdtemp(f->dir) != 0)
        return -1;
    snprintf(f->log, sizeof f->log, "%s/run.jsonl", f->dir);
    snprintf(f->svg, sizeof f->svg, "%s/run.svg", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    unlink(f->log);
    unlink(f->svg);
    rmdir(f->dir);
    free(f);
    return 0;
}

static size_t count_str(const char *s, const char *what)
{
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

static vkg_metrics_t *open_log(fixture *f, int resume, long long first_step)
{
    vkg_metrics_config c = vkg_metrics_config_default();
    c.log_path = f->log;
    c.resume = resume;
    c.first_step = first_step;
    vkg_metrics_t *m = NULL;
    assert_int_equal(vkg_metrics_create(&c, &m), VKG_OK);
    return m;
}

static vkg_metrics_row row_at(long long step, float loss)
{
    vkg_metrics_row r = {step,    loss,  1e-4f, 0.5f, (uint64_t)step * 1024,
                         1000.0f, 12.5f, 0,     0,    0,
                         NULL,    NULL,  NULL,  0,    0,
                         0,       0.0f,  0.0f,  0.0f, 0};
    return r;
}

static void test_json_roundtrip(void **state)
{
    fixture *f = *state;
    vkg_metrics_t *m = open_log(f, 0, 0);
    assert_string_equal(vkg_metrics_svg_path(m), f->svg); /* derived: run.jsonl -> run.svg */
    vkg_metrics_row r1 = {1,          3.14159274f, 1e-5f, 0.1f, 123456789012ull,
                          12345.678f, 1061.25f,    0,     0,    0,
                          NULL,       NULL,        NULL,  0,    0,
                          0,          0.0f,        0.0f,  0.0f, 0};
    vkg_metrics_row r2 = {2,
                          2.71828183f,
                          6e-4f,
                          1.0e-7f,
                          123456789999ull,
                          1.5e6f,
                          0.333333343f,
                          1,
                          2.99999976f,
                          0,
                          NULL,
                          NULL,
                          NULL,
                          5000000000ull,
                          1,
                          5000000012ull,
                          0.25f,
                          0.25f / 3.0f,
                          0.0f,
                          0};
    assert_int_equal(vkg_metrics_log(m, &r1), VKG_OK);
    assert_int_equal(vkg_metrics_log(m, &r2), VKG_OK);
    vkg_metrics_destroy(&m);
    assert_null(m);

    char *text = vkg_test_must_read(f->log, NULL);
    char *line2 = strchr(text, '\n') + 1;
    long long step;
    float loss, lr, gn, tps, ms, ev;
    unsigned long long tokens;
    int n = sscanf(text,
                   "{\"step\":%lld,\"loss\":%g,\"lr\":%g,\"grad_norm\":%g,\"tokens\":%llu,"
                   "\"tokens_per_s\":%g,\"ms\":%g}\n",
                   &step, &loss, &lr, &gn, &tokens, &tps, &ms);
    assert_int_equal(n, 7);
    assert_true(step == 1 && loss == r1.loss && lr == r1.lr && gn == r1.grad_norm);
    assert_true(tokens == r1.tokens && tps == r1.tokens_per_s && ms == r1.ms);
    assert_true(strstr(text, "eval_loss") > line2); /* only on the row that has it */
    /* an outer step's bytes (DiLoCo), only on its row, after the evaluation, then the step's
     * communication (a job of 2 or more ranks): bytes, time, exposed time and the compute
     * utilisation 1 - exposed / ms */
    const char *comm = strstr(text, ",\"outer_bytes\":5000000000,\"comm_bytes\":5000000012,");
    assert_true(comm > line2);
    assert_int_equal(count_str(text, "outer_bytes"), 1);
    assert_int_equal(count_str(text, "compute_util"), 1);
    float cms, ems, util;
    assert_int_equal(sscanf(strstr(comm, "\"comm_ms\""),
                            "\"comm_ms\":%g,\"exposed_comm_ms\":%g,\"compute_util\":%g}\n", &cms,
                            &ems, &util),
                     3);
    assert_true(cms == r2.comm_ms && ems == r2.exposed_comm_ms);
    assert_float_equal(util, 1.0f - r2.exposed_comm_ms / r2.ms, 1e-6);
    n = sscanf(line2,
               "{\"step\":%lld,\"loss\":%g,\"lr\":%g,\"grad_norm\":%g,\"tokens\":%llu,"
               "\"tokens_per_s\":%g,\"ms\":%g,\"eval_loss\":%g}\n",
               &step, &loss, &lr, &gn, &tokens, &tps, &ms, &ev);
    assert_int_equal(n, 8);
    assert_true(step == 2 && loss == r2.loss && lr == r2.lr && gn == r2.grad_norm);
    assert_true(tokens == r2.tokens && tps == r2.tokens_per_s && ms == r2.ms && ev == r2.eval_loss);
    assert_null(strstr(text, "rank"));
    assert_null(strstr(text, "nonfinite"));
    assert_int_equal(count_str(text, "\n"), 2);
    free(text);
}

static void test_nonfinite_and_rank(void **state)
{
    fixture *f = *state;
    vkg_metrics_config c = vkg_metrics_config_default();
    c.log_path = f->log;
    c.rank = 1;
    c.world = 4;
    vkg_metrics_t *m = NULL;
    assert_int_equal(vkg_metrics_create(&c, &m), VKG_OK);
    vkg_metrics_row good = row_at(1, 2.5f), bad = row_at(2, NAN);
    bad.grad_norm = INFINITY;
    bad.skipped = 1;
    assert_int_equal(vkg_metrics_log(m, &good), VKG_OK);
    assert_int_equal(vkg_metrics_log(m, &bad), VKG_OK);
    assert_int_equal(vkg_metrics_nonfinite(m), 1);
    size_t nt;
    const vkg_metrics_point *t = vkg_metrics_train(m, &nt);
    assert_int_equal(nt, 2);
    assert_true(t[0].step == 1 && t[0].value == 2.5f);
    assert_true(t[1].step == 2 && isnan(t[1].value));
    vkg_metrics_destroy(&m);
    char *text = vkg_test_must_read(f->log, NULL);
    char *line2 = strchr(text, '\n') + 1;
    assert_true(!strncmp(text, "{\"step\":1,\"rank\":1,\"world\":4,\"loss\":2.5,", 39));
    assert_non_null(strstr(line2, "\"loss\":null"));
    assert_non_null(strstr(line2, "\"grad_norm\":null"));
    assert_non_null(strstr(line2, ",\"nonfinite\":true,\"skipped\":true}\n"));
    assert_null(strstr(text, "\"skipped\":true}\n{")); /* only on the skipped step */
    assert_null(strstr(text, "nan"));
    assert_null(strstr(text, "inf"));
    free(text);
}

/* The coordinate pairs of the path with the given id. */
static size_t path_points(const char *svg, const char *id)
{
    char key[64];
    snprintf(key, sizeof key, "id=\"%s\"", id);
    const char *p = strstr(svg, key);
    assert_non_null(p);
    const char *d = strstr(p, " d=\"");
    assert_non_null(d);
    d += 4;
    const char *end = strchr(d, '"');
    size_t n = 0;
    for (const char *q = d; q < end; q++)
        n += *q == 'M' || *q == 'L';
    return n;
}

static void test_svg(void **state)
{
    fixture *f = *state;
    vkg_metrics_config c = vkg_metrics_config_default();
    c.log_path = f->log;
    c.title = "tiny <model> & co";
    vkg_metrics_t *m = NULL;
    assert_int_equal(vkg_metrics_create(&c, &m), VKG_OK);
    assert_int_equal(vkg_metrics_write_svg(m), VKG_OK); /* empty history: axes only */
    for (int s = 1; s <= 57; s++) {
        vkg_metrics_row r = row_at(s, 5.0f * expf(-0.05f * (float)s) + 1.0f);
        if (s % 10 == 0) {
            r.has_eval = 1;
            r.eval_loss = r.loss + 0.1f;
        }
        assert_int_equal(vkg_metrics_log(m, &r), VKG_OK);
    }
    assert_int_equal(vkg_metrics_write_svg(m), VKG_OK);
    vkg_metrics_destroy(&m);
    char *svg = vkg_test_must_read(f->svg, NULL);
    size_t len = strlen(svg);
    assert_true(!strncmp(svg, "<svg", 4));
    assert_true(len > 7 && !strcmp(svg + len - 7, "</svg>\n"));
    assert_int_equal(path_points(svg, "train"), 57);
    assert_int_equal(path_points(svg, "eval"), 5);
    assert_int_equal(count_str(svg, "<circle"), 5 + 1); /* eval points + legend marker */
    assert_int_equal(count_str(svg, "<text"), count_str(svg, "</text>"));
    assert_true(count_str(svg, "<text") >= 2 + 4 + 4); /* title, axis names, >= 4 ticks each */
    assert_non_null(strstr(svg, "tiny &lt;model&gt; &amp; co"));
    assert_non_null(strstr(svg, ">step</text>"));
    assert_non_null(strstr(svg, ">loss</text>"));
    assert_non_null(strstr(svg, "train loss"));
    assert_non_null(strstr(svg, "eval loss"));
    assert_null(strstr(svg, "nan"));
    free(svg);
}

static void write_history(fixture *f, int steps)
{
    vkg_metrics_t *m = open_log(f, 0, 0);
    for (int s = 1; s <= steps; s++) {
        vkg_metrics_row r = row_at(s, 10.0f - (float)s * 0.5f);
        r.has_eval = s % 5 == 0;
        r.eval_loss = 20.0f + (float)s;
        assert_int_equal(vkg_metrics_log(m, &r), VKG_OK);
    }
    vkg_metrics_destroy(&m);
}

static void test_resume(void **state)
{
    fixture *f = *state;
    write_history(f, 10);
    FILE *fp = fopen(f->log, "ab"); /* a line torn by a crash */
    fputs("{\"step\":11,\"lo", fp);
    fclose(fp);

    vkg_metrics_t *m = open_log(f, 1, 7); /* resumed run continues with step 7 */
    size_t nt, ne;
    const vkg_metrics_point *t = vkg_metrics_train(m, &nt);
    const vkg_metrics_point *e = vkg_metrics_eval(m, &ne);
    assert_int_equal(nt, 6);
    for (size_t i = 0; i < nt; i++)
        assert_true(t[i].step == (long long)i + 1 && t[i].value == 10.0f - (float)(i + 1) * 0.5f);
    assert_int_equal(ne, 1);
    assert_true(e[0].step == 5 && e[0].value == 25.0f);
    char *text = vkg_test_must_read(f->log, NULL);
    assert_int_equal(count_str(text, "\n"), 6);
    assert_non_null(strstr(text, "{\"step\":6,"));
    assert_null(strstr(text, "{\"step\":7,"));
    free(text);
    for (int s = 7; s <= 8; s++) {
        vkg_metrics_row r = row_at(s, 1.0f);
        assert_int_equal(vkg_metrics_log(m, &r), VKG_OK);
    }
    vkg_metrics_destroy(&m);
    text = vkg_test_must_read(f->log, NULL); /* continuous: steps 1..8 once each, in order */
    assert_int_equal(count_str(text, "\n"), 8);
    const char *p = text;
    for (int s = 1; s <= 8; s++) {
        long long step;
        assert_int_equal(sscanf(p, "{\"step\":%lld,", &step), 1);
        assert_int_equal(step, s);
        p = strchr(p, '\n') + 1;
    }
    free(text);

    m = open_log(f, 1, 100); /* resuming past the end keeps everything */
    t = vkg_metrics_train(m, &nt);
    assert_int_equal(nt, 8);
    vkg_metrics_destroy(&m);
    m = open_log(f, 0, 0); /* a new run empties the log */
    vkg_metrics_train(m, &nt);
    assert_int_equal(nt, 0);
    vkg_metrics_destroy(&m);
    text = vkg_test_must_read(f->log, NULL);
    assert_string_equal(text, "");
    free(text);
    unlink(f->log);
    m = open_log(f, 1, 5); /* resuming without a log starts one */
    vkg_metrics_destroy(&m);
    assert_int_equal(access(f->log, F_OK), 0);
}

static void test_resume_refuses_garbage(void **state)
{
    fixture *f = *state;
    write_history(f, 3);
    FILE *fp = fopen(f->log, "ab");
    fputs("{\"step\":4,\"loss\":oops}\n", fp);
    fclose(fp);
    vkg_metrics_config c = vkg_metrics_config_default();
    c.log_path = f->log;
    c.resume = 1;
    c.first_step = 10;
    vkg_metrics_t *m = NULL;
    assert_int_equal(vkg_metrics_create(&c, &m), VKG_ERR_FORMAT);
    assert_null(m);
    char want[160];
    snprintf(want, sizeof want, "%s:4:", f->log);
    assert_non_null(strstr(vkg_error_message(), want));
    c.log_path = NULL;
    assert_int_equal(vkg_metrics_create(&c, &m), VKG_ERR_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_json_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nonfinite_and_rank, setup, teardown),
        cmocka_unit_test_setup_teardown(test_svg, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_refuses_garbage, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
