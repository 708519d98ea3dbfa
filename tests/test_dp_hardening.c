/* Data-parallel training through `vkgpt launch` (VKGPT_BIN) against what used to break it:
 *  - a forged gradient: while two ranks train over ipc, this process plays an intruder who
 *    computed the job id (it is in the ipc socket names, and is a hash of public facts anyway),
 *    connects to both ranks' data sockets with the job-id password and sends correctly formed
 *    allreduce messages for the next collectives. Every connection is refused at the handshake,
 *    and the per-step losses are exactly those of an undisturbed run;
 *  - a step longer than --comm-timeout: with a 1 s timeout and 400 accumulation micro-steps per
 *    step (several seconds each; rank 1 has a quarter of rank 0's rows, so it waits in the
 *    allreduce for most of rank 0's step), training completes.
 * Every child is reaped (launch reaps its ranks; this test reaps launch). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.h>

#include "testproc.h"

static char tmp_root[512], data_path[600];

/* Run VKGPT_BIN with args (stderr merged into stdout) and the extra environment entry env (or
 * NULL) in *p, bounded by timeout_s: past it the child is killed, which the callers' check of its
 * wait status reports (no failure here, so that a caller's intruder thread is stopped first). */
static void run(vkg_test_proc *p, const char *const *args, const char *env, double timeout_s)
{
    const char *const envp[] = {env, NULL};
    const vkg_test_proc_opts opts = {.env = envp, .merge_stderr = 1};
    vkg_test_proc_start(p, args, &opts);
    double end = vkg_test_now() + timeout_s;
    while (!p->done && vkg_test_now() < end)
        vkg_test_proc_pump(p, 0.2, NULL);
    if (p->done)
        vkg_test_proc_wait(p, 1); /* what is left in the pipe */
    else
        vkg_test_proc_kill(p);
}

static int group_setup(void **state)
{
    (void)state;
    if (vkg_test_tmp_make(tmp_root, sizeof tmp_root, "vkg_test_hard"))
        return -1;
    snprintf(data_path, sizeof data_path, "%s/tiny.txt", tmp_root);
    FILE *f = fopen(data_path, "w");
    if (!f)
        return -1;
    for (int i = 0; i < 400; i++)
        fprintf(f, "Line %d: the quick brown fox jumps over the lazy dog, again and again.\n", i);
    fclose(f);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    return vkg_test_tmp_remove(tmp_root);
}

#define MODEL_ARGS                                                                                 \
    "train", "--data", data_path, "--layers", "2", "--heads", "2", "--channels", "32", "--ctx",    \
        "32", "--seq", "32", "--lr", "3e-3", "--sample-len", "0"
#define TRAIN_ARGS MODEL_ARGS, "--batch", "2"

/* The "loss" values of log.jsonl, one per line, concatenated. */
static void read_losses(const char *log, char *out, size_t cap)
{
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    char line[2048];
    out[0] = '\0';
    while (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "\"loss\":");
        assert_non_null(p);
        size_t n = strcspn(p, ",}");
        strncat(out, p, n < cap - strlen(out) - 2 ? n : cap - strlen(out) - 2);
        strcat(out, "\n");
    }
    fclose(f);
}

/* ---- the intruder ---- */

typedef struct intruder {
    char dir[700];
    volatile int stop;
    int attempts, refused, admitted; /* connections tried, refused and completed */
} intruder;

static void le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Connect to one rank's data socket with the job-id password and send forged allreduce data
 * for collectives 2..40 as rank `as`; record how the handshake ended. */
static void attack(intruder *in, const char *path, unsigned long long job, unsigned gen, int as)
{
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_DEALER), *mon = zmq_socket(ctx, ZMQ_PAIR);
    int linger = 500;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_socket_monitor(s, "inproc://forger-mon", ZMQ_EVENT_ALL);
    zmq_connect(mon, "inproc://forger-mon");
    char pw[64], ep[1100];
    snprintf(pw, sizeof pw, "%016llx:%u", job, gen);
    zmq_setsockopt(s, ZMQ_PLAIN_USERNAME, "vkgpt", 5);
    zmq_setsockopt(s, ZMQ_PLAIN_PASSWORD, pw, strlen(pw));
    snprintf(ep, sizeof ep, "ipc://%s", path);
    zmq_connect(s, ep);
    static float grad[8192];
    for (int i = 0; i < 8192; i++)
        grad[i] = 1000.0f;
    for (uint64_t seq = 2; seq <= 40; seq++) {
        uint8_t h[64] = {0};
        le(h, 0x43474B56u, 4), le(h + 4, 2, 2), h[6] = 4; /* magic, version, data */
        le(h + 8, job, 8), le(h + 16, gen, 4), le(h + 20, (uint64_t)as, 4), le(h + 24, seq, 8);
        le(h + 36, 1u | (0xffffu << 16), 4), le(h + 40, sizeof grad, 8);
        zmq_send(s, h, sizeof h, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        zmq_send(s, grad, sizeof grad, ZMQ_DONTWAIT);
    }
    int result = 0;
    double end = vkg_test_now() + 3;
    while (!result && vkg_test_now() < end) {
        zmq_pollitem_t it = {mon, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) <= 0)
            continue;
        zmq_msg_t ev, addr;
        zmq_msg_init(&ev), zmq_msg_init(&addr);
        zmq_msg_recv(&ev, mon, 0), zmq_msg_recv(&addr, mon, 0);
        uint16_t e;
        memcpy(&e, zmq_msg_data(&ev), 2);
        if (e == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
            result = 1;
        else if (e == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH || e == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
                 e == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
            result = -1;
        zmq_msg_close(&ev), zmq_msg_close(&addr);
    }
    in->attempts++;
    in->refused += result < 0;
    in->admitted += result > 0;
    zmq_socket_monitor(s, NULL, 0);
    zmq_close(mon);
    zmq_close(s);
    zmq_ctx_term(ctx);
}

typedef struct target {
    intruder *in;
    char path[1000];
    unsigned long long job;
    unsigned gen;
    int as;
} target;

static pthread_mutex_t count_mu = PTHREAD_MUTEX_INITIALIZER;

static void *attack_main(void *p)
{
    target *t = p;
    intruder local = {0};
    attack(&local, t->path, t->job, t->gen, t->as);
    pthread_mutex_lock(&count_mu);
    t->in->attempts += local.attempts;
    t->in->refused += local.refused;
    t->in->admitted += local.admitted;
    pthread_mutex_unlock(&count_mu);
    return NULL;
}

/* Watch the ipc directory; attack each rank's data socket (in a thread of its own) as soon as it
 * appears. */
static void *intruder_main(void *p)
{
    intruder *in = p;
    target tg[2];
    pthread_t th[2];
    int found[2] = {0, 0};
    while (!in->stop && !(found[0] && found[1])) {
        DIR *d = opendir(in->dir);
        for (struct dirent *de; d && (de = readdir(d));) {
            unsigned long long job;
            unsigned gen;
            int rank;
            if (sscanf(de->d_name, "vkg-%16llx-g%u-r%d.sock", &job, &gen, &rank) != 3 || rank < 0 ||
                rank > 1 || found[rank])
                continue;
            tg[rank] = (target){.in = in, .job = job, .gen = gen, .as = 1 - rank};
            snprintf(tg[rank].path, sizeof tg[rank].path, "%.700s/%.250s", in->dir, de->d_name);
            found[rank] = pthread_create(&th[rank], NULL, attack_main, &tg[rank]) == 0;
        }
        if (d)
            closedir(d);
        usleep(1000);
    }
    for (int r = 0; r < 2; r++)
        if (found[r])
            pthread_join(th[r], NULL);
    return NULL;
}

static void train_ipc(const char *name, intruder *in, char *losses, size_t cap)
{
    char dir[700], env[800], ckpt[700], log[800];
    snprintf(dir, sizeof dir, "%s/ipc_%s", tmp_root, name);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt_%s", tmp_root, name);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(env, sizeof env, "VKG_COMM_IPC_DIR=%s", dir);
    pthread_t th;
    if (in) {
        snprintf(in->dir, sizeof in->dir, "%s", dir);
        assert_int_equal(pthread_create(&th, NULL, intruder_main, in), 0);
    }
    const char *args[] = {"launch",   "-n",      "2", "--transport", "ipc", "--",
                          TRAIN_ARGS, "--steps", "8", "--ckpt-dir",  ckpt,  NULL};
    vkg_test_proc p;
    run(&p, args, env, 240);
    if (in) {
        in->stop = 1;
        pthread_join(th, NULL);
    }
    printf("%s", p.buf[0]);
    if (!WIFEXITED(p.wstatus) || WEXITSTATUS(p.wstatus) != 0)
        fail_msg("launch (%s) failed (wait status %d)", name, p.wstatus);
    vkg_test_proc_free(&p);
    snprintf(log, sizeof log, "%s/log.jsonl", ckpt);
    read_losses(log, losses, cap);
}

static void test_forged_gradient_refused(void **state)
{
    (void)state;
    char clean[4096], attacked[4096];
    train_ipc("clean", NULL, clean, sizeof clean);
    intruder in = {0};
    train_ipc("attacked", &in, attacked, sizeof attacked);
    printf("intruder: %d connections, %d refused, %d admitted\n", in.attempts, in.refused,
           in.admitted);
    printf("losses undisturbed:\n%sattacked:\n%s", clean, attacked);
    assert_int_equal(in.attempts, 2);
    assert_int_equal(in.refused, 2);
    assert_int_equal(in.admitted, 0);
    assert_string_equal(clean, attacked);
}

/* The "ms" of every line of log.jsonl: the slowest step's duration (0 when none). */
static double slowest_step_ms(const char *log)
{
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    char line[2048];
    double worst = 0;
    while (fgets(line, sizeof line, f)) {
        const char *m = strstr(line, "\"ms\":");
        double ms = m ? atof(m + 5) : 0;
        worst = ms > worst ? ms : worst;
    }
    fclose(f);
    return worst;
}

/* On lavapipe (installed with vkgpt's dependencies, and chosen here by name so that a faster
 * device cannot make the steps short), 400 micro-steps take seconds. */
static void test_step_longer_than_timeout(void **state)
{
    (void)state;
    char ckpt[700], log[800];
    snprintf(ckpt, sizeof ckpt, "%s/long", tmp_root);
    snprintf(log, sizeof log, "%s/log.jsonl", ckpt);
    /* rows 4 + 1 per global micro-batch: 5 x 32 = 160 tokens; 64000 / 160 = 400 micro-steps */
    const char *args[] = {"launch",   "-n",
                          "2",        "--transport",
                          "ipc",      "--devices",
                          "llvmpipe", "--",
                          MODEL_ARGS, "--steps",
                          "2",        "--rank-batch",
                          "4,1",      "--total-batch",
                          "64000",    "--comm-timeout",
                          "1",        "--ckpt-dir",
                          ckpt,       NULL};
    vkg_test_proc p;
    run(&p, args, NULL, 400);
    printf("%s", p.buf[0]);
    if (!WIFEXITED(p.wstatus) || WEXITSTATUS(p.wstatus) != 0)
        fail_msg("launch failed (wait status %d)", p.wstatus);
    if (!strstr(p.buf[0], "[rank 0] step 2/2"))
        fail_msg("step 2 never finished:\n%s", p.buf[0]);
    double ms = slowest_step_ms(log);
    printf("slowest step %.0f ms with a 1 s communication timeout\n", ms);
    assert_true(ms > 1000); /* the premise: steps really were longer than the timeout */
    vkg_test_proc_free(&p);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forged_gradient_refused),
        cmocka_unit_test(test_step_longer_than_timeout),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
