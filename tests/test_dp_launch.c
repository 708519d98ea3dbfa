/* `vkgpt launch` end to end through the built binary (VKGPT_BIN) on a tiny byte-level model and a
 * small text file, ranks on loopback (ipc and tcp):
 *  - `launch -n 2 --zero 1` trains, each rank naming the half of the parameters whose moments it
 *    holds and their bytes (with `--zero-copy 0`: the buckets' copy path, named on start-up);
 *  - `launch -n 2` trains: exit 0, every line carries its rank prefix, both ranks report the
 *    data-parallel split, their collectives and their gradient buckets' path (zero-copy or copy)
 *    and count 2 x B x T tokens per step, only rank 0 logs steps and writes
 *    the checkpoint and log.jsonl, whose token count covers both ranks; the validation layer is on
 *    in every rank and reports nothing;
 *  - `launch -n 2 --grad-dtype bf16` trains, both ranks saying they exchange gradients in bf16
 *    (and ranks without the flag say fp32);
 *  - `launch -n 2 -- train --sync diloco` trains, printing the outer steps' exchange, logging
 *    outer_bytes on those steps and writing outer.bin into the checkpoint;
 *  - `vkgpt train` started twice with only torchrun's, Slurm's or Open MPI's variables (plus
 *    MASTER_ADDR/MASTER_PORT) trains as 2 ranks over tcp;
 *  - killing rank 1 with SIGKILL mid-training makes launch name the killed rank, stop rank 0 and
 *    exit non-zero within twice the communication timeout (plus start-up slack); the newest
 *    checkpoint stays complete and a relaunch with --resume continues from it to the end;
 *    the same with the two ranks as the two stages of a pipeline (--pp 2);
 *  - killing launch itself with SIGKILL stops its ranks within a bound (no rank trains on
 *    unwatched), each exiting cleanly with rank 0's checkpoint of the last logged step;
 *  - SIGUSR1 (a preemption notice) to rank 1 alone: both ranks stop after the same step, launch
 *    exits 75, the checkpoint of the last logged step is complete, and the run resumed from it
 *    ends with bitwise the losses, model and state of the same run uninterrupted; the same on a
 *    Llama-family model (GQA, RMSNorm, rope, SwiGLU, untied head: model.safetensors);
 *  - --max-restarts 1: rank 1 SIGKILLed mid-run, the job goes on from the newest complete
 *    checkpoint with 1 rank and ends bitwise as a `--resume` by hand on 1 rank from that
 *    checkpoint (the time from the kill to the first step after it is printed), for GPT-2 and the
 *    Llama-family model; a second loss
 *    ends the job naming both; --min-ranks 2 refuses to go on with 1; without train's
 *    --total-batch, --max-restarts is refused;
 *  - --rank-batch auto with rank 1 slowed (VKG_TEST_ROW_DELAY_MS): the split moves to rank 0
 *    after the calibration and the run is byte for byte a chain of fixed --rank-batch runs with
 *    the splits its log records, resumed where they change.
 * Every child is reaped (launch reaps its ranks; this test reaps launch). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testproc.h"

#define COMM_TIMEOUT_S 3

static char tmp_root[512], data_path[600];

/* Start VKGPT_BIN with args, stderr merged into stdout; env (NULL-terminated "NAME=value" list,
 * or NULL) is added to the child's environment. */
static void start_env(vkg_test_proc *p, const char *const *args, const char *const *env)
{
    const vkg_test_proc_opts opts = {.env = env, .merge_stderr = 1};
    vkg_test_proc_start(p, args, &opts);
}

static void start(vkg_test_proc *p, const char *const *args)
{
    start_env(p, args, NULL);
}

static void expect_output(const vkg_test_proc *p, const char *needle)
{
    if (!strstr(p->buf[0], needle))
        fail_msg("the output does not contain '%s':\n%s", needle, p->buf[0]);
}

static int group_setup(void **state)
{
    (void)state;
    if (vkg_test_tmp_make(tmp_root, sizeof tmp_root, "vkg_test_launch"))
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

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* The highest step_<n> under dir with a DONE marker (0 when none). */
static long newest_complete(const char *dir)
{
    long best = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    for (struct dirent *de; (de = readdir(d));) {
        char done[1400];
        long step;
        if (sscanf(de->d_name, "step_%ld", &step) != 1)
            continue;
        snprintf(done, sizeof done, "%s/%s/DONE", dir, de->d_name);
        if (file_exists(done) && step > best)
            best = step;
    }
    closedir(d);
    return best;
}

static int count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    int n = 0, ch;
    if (!f)
        return -1;
    while ((ch = fgetc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    return n;
}

#define TRAIN_ARGS                                                                                 \
    "train", "--data", data_path, "--layers", "2", "--heads", "2", "--channels", "32", "--ctx",    \
        "32", "--batch", "2", "--seq", "32", "--lr", "3e-3", "--sample-len", "0",                  \
        "--comm-timeout", "3", "--validation"

/* TRAIN_ARGS into argv from k on, its --layers .. --ctx replaced by --model MODEL when model is
 * given (a config.json); returns the next index. */
static int put_train_args(const char **argv, int k, const char *model)
{
    const char *gpt2[] = {TRAIN_ARGS};
    for (size_t i = 0; i < sizeof gpt2 / sizeof gpt2[0]; i++) {
        if (model &&
            !strcmp(gpt2[i], "--layers")) { /* --layers 2 --heads 2 --channels 32 --ctx 32 */
            argv[k++] = "--model", argv[k++] = model, i += 7;
            continue;
        }
        argv[k++] = gpt2[i];
    }
    return k;
}

/* A Llama-family config.json (GQA 2/1, RMSNorm, rope, SwiGLU, untied head) in the test's folder,
 * for TRAIN_ARGS's shapes; its path into out. */
static const char *llama_config(char *out, size_t cap)
{
    snprintf(out, cap, "%s/llama-tiny.json", tmp_root);
    FILE *f = fopen(out, "w");
    assert_non_null(f);
    fprintf(f, "{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 48, "
               "\"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"num_key_value_heads\": 1, "
               "\"vocab_size\": 257, \"max_position_embeddings\": 32, \"rms_norm_eps\": 1e-5, "
               "\"tie_word_embeddings\": false}\n");
    assert_int_equal(fclose(f), 0);
    return out;
}

static void test_launch_two_ranks_train(void **state)
{
    (void)state;
    char ckpt[700], path[800];
    snprintf(ckpt, sizeof ckpt, "%s/ok", tmp_root);
    const char *args[] = {"launch",   "-n",      "2", "--transport", "ipc", "--",
                          TRAIN_ARGS, "--steps", "4", "--ckpt-dir",  ckpt,  NULL};
    vkg_test_proc p;
    start(&p, args);
    vkg_test_proc_wait(&p, 240);
    printf("%s", p.buf[0]);
    if (!WIFEXITED(p.wstatus) || WEXITSTATUS(p.wstatus) != 0)
        fail_msg("launch failed (wait status %d)", p.wstatus);
    expect_output(&p, "[rank 0] data parallel: rank 0 of 2, micro-batches 2,2 rows (4 x 32 = 128");
    expect_output(&p, "[rank 1] data parallel: rank 1 of 2");
    /* ranks of one host share memory by default */
    expect_output(&p,
                  "[rank 0] transport: collectives over shm (2 ranks on this host, single-copy ");
    /* which way the buckets go depends on the device: the line says so either way */
    expect_output(&p, "[rank 1] transport: gradient buckets: ");
    if (!strstr(p.buf[0], "[rank 0] transport: gradient buckets: zero-copy: ") &&
        !strstr(p.buf[0], "[rank 0] transport: gradient buckets: copy: "))
        fail_msg("no zero-copy or copy line for rank 0's gradient buckets:\n%s", p.buf[0]);
    expect_output(&p, "[rank 0] step 4/4");
    expect_output(&p, "128 tokens per step");
    expect_output(&p, "[rank 0] validation layer: 0 message(s)");
    expect_output(&p, "[rank 1] validation layer: 0 message(s)");
    if (strstr(p.buf[0], "[rank 1] step "))
        fail_msg("rank 1 logged steps:\n%s", p.buf[0]);
    for (char *line = p.buf[0]; *line;) { /* every rank line is prefixed */
        char *nl = strchr(line, '\n');
        if (strncmp(line, "[rank ", 6) && strncmp(line, "vkgpt launch: ", 14))
            fail_msg("a line without a rank prefix: %.*s", (int)(nl ? nl - line : 80), line);
        line = nl ? nl + 1 : line + strlen(line);
    }
    snprintf(path, sizeof path, "%s/step_00000004/DONE", ckpt);
    assert_true(file_exists(path));
    snprintf(path, sizeof path, "%s/log.jsonl", ckpt);
    assert_int_equal(count_lines(path), 4);
    /* the log counts both ranks' tokens: 2 ranks x 2 rows x 32 per step */
    char first[512] = "";
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(first, sizeof first, f));
    fclose(f);
    if (!strstr(first, "\"step\":1,") || !strstr(first, "\"tokens\":128,"))
        fail_msg("log.jsonl's first line does not count 128 tokens at step 1: %s", first);
    vkg_test_proc_free(&p);
}

/* `launch -n 4` on one host: the collectives take shared memory by default and every rank's
 * gradient buckets live in its part of the segment where the device can import them. */
static void test_launch_four_ranks_pick_shm(void **state)
{
    (void)state;
    const char *args[] = {"launch", "-n", "4", "--", TRAIN_ARGS, "--steps", "1", NULL};
    vkg_test_proc p;
    start(&p, args);
    vkg_test_proc_wait(&p, 240);
    printf("%s", p.buf[0]);
    if (!WIFEXITED(p.wstatus) || WEXITSTATUS(p.wstatus) != 0)
        fail_msg("launch -n 4 failed (wait status %d)", p.wstatus);
    expect_output(&p, "[rank 0] transport: collectives over shm (4 ranks on this host");
    expect_output(&p, "[rank 0] transport: gradients exchanged in fp32\n");
    for (int r = 0; r < 4; r++) {
        char needle[96];
        snprintf(needle, sizeof needle, "[rank %d] transport: gradient buckets: ", r);
        expect_output(&p, needle);
        snprintf(needle, sizeof needle, "[rank %d] validation layer: 0 message(s)", r);
        expect_output(&p, needle);
    }
    if (strstr(p.buf[0], "gradient buckets: zero-copy: ") &&
        !strstr(p.buf[0], "this rank's part of the shared-memory segment"))
        fail_msg("zero-copy buckets outside the segment with 4 ranks over shm:\n%s", p.buf[0]);
    expect_output(&p, "[rank 0] step 1/1");
    vkg_test_proc_free(&p);
}

/* `launch -n 2 --zero 1`: both ranks train and say which parameters' moments they hold and how
 * many bytes: consecutive halves of the parameters (give or take a partial sum of the norm), 2 x
 * 4 bytes per parameter. With --zero-copy 0 the buckets take the copy path, saying so. */
static void test_launch_zero(void **state)
{
    (void)state;
    const char *args[] = {"launch",   "-n",      "2", "--zero",      "1", "--",
                          TRAIN_ARGS, "--steps", "2", "--zero-copy", "0", NULL};
    vkg_test_proc p;
    start(&p, args);
    vkg_test_proc_wait(&p, 240);
    printf("%s", p.buf[0]);
    if (!WIFEXITED(p.wstatus) || WEXITSTATUS(p.wstatus) != 0)
        fail_msg("launch failed (wait status %d)", p.wstatus);
    expect_output(&p, "[rank 0] step 2/2");
    expect_output(&p, "[rank 1] validation layer: 0 message(s)");
    expect_output(&p, "[rank 1] transport: gradient buckets: copy: zero-copy turned off "
                      "(--zero-copy 0)");
    size_t first[2], end[2], n[2], bytes[2];
    for (int r = 0; r < 2; r++) {
        char needle[128];
        snprintf(needle, sizeof needle,
                 "[rank %d] optimizer: AdamW, moments sharded over 2 ranks (ZeRO-1): this rank "
                 "holds those of parameters [",
                 r);
        const char *at = strstr(p.buf[0], needle);
        if (!at)
            fail_msg("no ZeRO-1 line of rank %d:\n%s", r, p.buf[0]);
        assert_int_equal(sscanf(at + strlen(needle), "%zu, %zu) of %zu, %zu bytes", &first[r],
                                &end[r], &n[r], &bytes[r]),
                         4);
        assert_int_equal(bytes[r], 2 * 4 * (end[r] - first[r]));
    }
    assert_true(first[0] == 0 && end[0] == first[1] && end[1] == n[0] && n[1] == n[0]);
    assert_true(end[0] > n[0] / 2 - n[0] / 8 && end[0] < n[0] / 2 + n[0] / 8);
    vkg_test_proc_free(&p);
}

/* `launch -n 2 --grad-dtype bf16` passes the flag to both ranks: they train, each saying that it
 * exchanges gradients in bf16, with the validation layer quiet. */
static void test_launch_grad_bf16(void **state)
{
    (void)state;
    const char *args[] = {"launch",  "-n", "2", "--grad-dtype", "bf16", "--", TRAIN_ARGS,
                          "--steps", "2",  NULL};
    vkg_test_proc p;
    start(&p, args);
    vkg_test_proc_wait(&p, 240);
    printf("%s", p.buf[0]);
    if (!WIFEXITED(p.wstatus) || WEXITSTATUS(p.wstatus) != 0)
        fail_msg("launch --grad-dtype bf16 failed (wait status %d)", p.wstatus);
    for (int r = 0; r < 2; r++) {
        char needle[96];
        snprintf(needle, sizeof needle, "[rank %d] transport: gradients exchanged in bf16 (", r);
        expect_output(&p, needle);
        snprintf(needle, sizeof needle, "[rank %d] validation layer: 0 message(s)", r);
        expect_output(&p, needle);
    }
    expect_output(&p, "[rank 0] step 2/2");
    vkg_test_proc_free(&p);
}

/* `launch -n 2 -- train --sync diloco --inner-steps 2 --outer-dtype int8`: both ranks name the
 * outer step's settings, rank 0 prints a line for each outer step (after steps 2 and 4) with its
 * dtype and bytes, log.jsonl records outer_bytes on those two steps alone, and the checkpoint
 * holds outer.bin. */
static void test_launch_diloco(void **state)
{
    (void)state;
    char dir[700], path[1400];
    snprintf(dir, sizeof dir, "%s/diloco", tmp_root);
    const char *args[] = {"launch",   "-n",
                          "2",        "--",
                          TRAIN_ARGS, "--steps",
                          "4",        "--sync",
                          "diloco",   "--inner-steps",
                          "2",        "--outer-dtype",
                          "int8",     "--ckpt-dir",
                          dir,        NULL};
    vkg_test_proc p;
    start(&p, args);
    vkg_test_proc_wait(&p, 240);
    printf("%s", p.buf[0]);
    if (!WIFEXITED(p.wstatus) || WEXITSTATUS(p.wstatus) != 0)
        fail_msg("launch with --sync diloco failed (wait status %d)", p.wstatus);
    for (int r = 0; r < 2; r++) {
        char needle[160];
        snprintf(needle, sizeof needle,
                 "[rank %d] sync: diloco: 2 inner steps, then the pseudo-gradient exchanged in "
                 "int8",
                 r);
        expect_output(&p, needle);
        snprintf(needle, sizeof needle, "[rank %d] validation layer: 0 message(s)", r);
        expect_output(&p, needle);
    }
    expect_output(&p, "[rank 0] outer step after step 2: pseudo-gradient exchanged in int8");
    expect_output(&p, "[rank 0] outer step after step 4: pseudo-gradient exchanged in int8");
    expect_output(&p, "allgathered: each rank receives 1 of them");
    assert_null(strstr(p.buf[0], "outer step after step 3"));
    assert_null(strstr(p.buf[0], "[rank 1] outer step"));
    snprintf(path, sizeof path, "%s/log.jsonl", dir);
    char *log = vkg_test_must_read(path, NULL);
    int outer_rows = 0;
    for (const char *at = log; (at = strstr(at, "\"outer_bytes\":")); at++)
        outer_rows++;
    assert_int_equal(outer_rows, 2);
    assert_non_null(strstr(log, "{\"step\":2,"));
    assert_true(strstr(strstr(log, "{\"step\":2,"), "outer_bytes") < strstr(log, "{\"step\":3,"));
    free(log);
    snprintf(path, sizeof path, "%s/step_00000004/outer.bin", dir);
    assert_true(file_exists(path));
    vkg_test_proc_free(&p);
}

/* A free TCP port on 127.0.0.1 right now. */
static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(s >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(s, (struct sockaddr *)&a, &len), 0);
    close(s);
    return ntohs(a.sin_port);
}

/* `vkgpt train` started twice by hand, as a launcher on two hosts would start it, with only that
 * launcher's variables (torchrun, Slurm's srun, Open MPI's mpirun) plus MASTER_ADDR/PORT: both
 * ranks join over tcp, train, and only rank 0 logs steps. */
static void test_launcher_variables(void **state)
{
    (void)state;
    static const char *const vars[3][3] = {
        {"RANK", "WORLD_SIZE", "LOCAL_RANK"},
        {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    };
    for (int l = 0; l < 3; l++) {
        char env[2][6][96];
        const char *envp[2][7];
        int port = free_port();
        vkg_test_proc p[2];
        for (int r = 0; r < 2; r++) {
            snprintf(env[r][0], sizeof env[r][0], "%s=%d", vars[l][0], r);
            snprintf(env[r][1], sizeof env[r][1], "%s=2", vars[l][1]);
            snprintf(env[r][2], sizeof env[r][2], "%s=%d", vars[l][2], r);
            snprintf(env[r][3], sizeof env[r][3], "MASTER_ADDR=127.0.0.1");
            snprintf(env[r][4], sizeof env[r][4], "MASTER_PORT=%d", port);
            snprintf(env[r][5], sizeof env[r][5], "VKG_JOB_ID=launcher-test-%d-%d", l, port);
            for (int i = 0; i < 6; i++)
                envp[r][i] = env[r][i];
            envp[r][6] = NULL;
            const char *args[] = {TRAIN_ARGS, "--steps", "2", NULL};
            start_env(&p[r], args, envp[r]);
        }
        for (int r = 0; r < 2; r++) {
            vkg_test_proc_wait(&p[r], 120);
            printf("%s rank %d:\n%s", vars[l][0], r, p[r].buf[0]);
            if (!WIFEXITED(p[r].wstatus) || WEXITSTATUS(p[r].wstatus) != 0)
                fail_msg("rank %d started by %s failed (wait status %d)", r, vars[l][0],
                         p[r].wstatus);
        }
        expect_output(&p[0], "data parallel: rank 0 of 2");
        expect_output(&p[0], "step 2/2");
        expect_output(&p[1], "data parallel: rank 1 of 2");
        expect_output(&p[1], "validation layer: 0 message(s)");
        if (strstr(p[1].buf[0], "step 1/2"))
            fail_msg("rank 1 logged steps:\n%s", p[1].buf[0]);
        vkg_test_proc_free(&p[0]), vkg_test_proc_free(&p[1]);
    }
}

/* pp: the two ranks are the two stages of a pipeline instead of data-parallel replicas. */
static void kill_rank_and_resume(const char *transport, int pp)
{
    char ckpt[700], path[800];
    snprintf(ckpt, sizeof ckpt, "%s/fault_%s%s", tmp_root, transport, pp ? "_pp" : "");
    const char *args[] = {
        "launch",   "-n",
        "2",        "--transport",
        transport,  "--",
        TRAIN_ARGS, "--steps",
        "1000000",  "--ckpt-dir",
        ckpt,       "--ckpt-every",
        "3",        "--keep",
        "2",        pp ? "--pp" : NULL,
        "2",        "--total-batch", /* 2 micro-batches: 1F1B needs one per stage */
        "128",      NULL};
    vkg_test_proc p;
    start(&p, args);
    /* Wait for a complete checkpoint and rank 1's pid. */
    double end = vkg_test_now() + 180;
    char *pid_line = NULL;
    while (vkg_test_now() < end && !p.done && (newest_complete(ckpt) < 3 || !pid_line)) {
        vkg_test_proc_pump(&p, 0.2, NULL);
        pid_line = strstr(p.buf[0], "rank 1 is pid ");
    }
    if (!pid_line || newest_complete(ckpt) < 3) {
        kill(p.pid, SIGKILL);
        vkg_test_proc_wait(&p, 30);
        fail_msg("no checkpoint or no rank 1 pid; output:\n%s", p.buf[0]);
    }
    pid_t victim = (pid_t)atoi(pid_line + strlen("rank 1 is pid "));
    assert_true(victim > 0);
    vkg_test_proc_pump(&p, 0.5, NULL); /* mid-training, between checkpoints or in one */
    double t0 = vkg_test_now();
    assert_int_equal(kill(victim, SIGKILL), 0);
    vkg_test_proc_wait(&p, 60);
    double took = vkg_test_now() - t0;
    printf("%s", p.buf[0]);
    printf("launch (%s) exited %.2f s after SIGKILL of rank 1 (comm timeout %d s)\n", transport,
           took, COMM_TIMEOUT_S);
    if (!WIFEXITED(p.wstatus) || WEXITSTATUS(p.wstatus) == 0)
        fail_msg("launch should exit non-zero (wait status %d)", p.wstatus);
    expect_output(&p, "vkgpt launch: rank 1 was killed by signal 9");
    expect_output(&p, "stopping the other ranks");
    if (took > 2.0 * COMM_TIMEOUT_S + 1.0)
        fail_msg("launch took %.2f s to stop, more than twice the %d s timeout", took,
                 COMM_TIMEOUT_S);
    vkg_test_proc_free(&p);
    /* The newest complete checkpoint resumes, on 2 ranks again, to 2 steps past it. */
    long step = newest_complete(ckpt);
    assert_true(step >= 3);
    char steps[32], resumed[64];
    snprintf(steps, sizeof steps, "%ld", step + 2);
    snprintf(resumed, sizeof resumed, "[rank 0] resumed at step %ld", step);
    const char *again[] = {"launch",
                           "-n",
                           "2",
                           "--transport",
                           transport,
                           "--",
                           TRAIN_ARGS,
                           "--steps",
                           steps,
                           "--ckpt-dir",
                           ckpt,
                           "--resume",
                           pp ? "--pp" : NULL,
                           "2",
                           "--total-batch",
                           "128",
                           NULL};
    start(&p, again);
    vkg_test_proc_wait(&p, 240);
    printf("%s", p.buf[0]);
    if (!WIFEXITED(p.wstatus) || WEXITSTATUS(p.wstatus) != 0)
        fail_msg("the resumed launch failed (wait status %d)", p.wstatus);
    expect_output(&p, resumed);
    snprintf(path, sizeof path, "%s/step_%08ld/DONE", ckpt, step + 2);
    assert_true(file_exists(path));
    vkg_test_proc_free(&p);
}

/* The bytes of path into a malloc'd buffer (*n bytes), or NULL. */
static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = size >= 0 ? malloc((size_t)size + 1) : NULL;
    if (b && fread(b, 1, (size_t)size, f) != (size_t)size)
        free(b), b = NULL;
    fclose(f);
    if (b)
        b[size] = '\0', *n = (size_t)size;
    return b;
}

/* Files a and b hold the same bytes (a file's name in the failure). */
static void expect_same_file(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    if (!x || !y || na != nb || memcmp(x, y, na))
        fail_msg("%s and %s differ (%zu and %zu bytes)", a, b, na, nb);
    free(x), free(y);
}

/* Each step's "loss":... field of log.jsonl at dir, one line each, into out (cap bytes). */
static void losses_of(const char *dir, char *out, size_t cap)
{
    char path[800];
    snprintf(path, sizeof path, "%s/log.jsonl", dir);
    size_t n = 0, used = 0;
    char *log = slurp(path, &n);
    assert_non_null(log);
    out[0] = '\0';
    for (char *at = log; (at = strstr(at, "\"loss\":")) && used + 40 < cap; at++) {
        size_t len = strcspn(at, ",}");
        used += (size_t)snprintf(out + used, cap - used, "%.*s\n", (int)len, at);
    }
    free(log);
}

/* The runs in folders x and y logged the same losses and wrote the same model.bin and state.bin
 * at step `step`, byte for byte. */
static void expect_same_run(const char *x, const char *y, int step)
{
    static char la[8192], lb[8192];
    losses_of(x, la, sizeof la), losses_of(y, lb, sizeof lb);
    assert_string_equal(la, lb);
    char a[900], b[900];
    snprintf(a, sizeof a, "%s/step_%08d/model.bin", x, step);
    int gpt2 = file_exists(a); /* else the Llama family's config.json and model.safetensors */
    const char *names[] = {"state.bin", gpt2 ? "model.bin" : "model.safetensors",
                           gpt2 ? NULL : "config.json"};
    for (int f = 0; f < 3 && names[f]; f++) {
        snprintf(a, sizeof a, "%s/step_%08d/%s", x, step, names[f]);
        snprintf(b, sizeof b, "%s/step_%08d/%s", y, step, names[f]);
        expect_same_file(a, b);
    }
}

/* The preemption runs' command line into argv: launch -n 2 over ipc, TRAIN_ARGS (model: NULL or a
 * config.json, put_train_args) for 60 steps into dir, checkpoints only at the end; resume adds
 * --resume. */
static void preempt_args(const char **argv, const char *dir, const char *model, int resume)
{
    int k = 0;
    const char *head[] = {"launch", "-n", "2", "--transport", "ipc", "--"};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
        argv[k++] = head[i];
    k = put_train_args(argv, k, model);
    const char *tail[] = {"--steps",      "60",   "--ckpt-dir", dir,
                          "--ckpt-every", "1000", "--keep",     "0"};
    for (size_t i = 0; i < sizeof tail / sizeof tail[0]; i++)
        argv[k++] = tail[i];
    if (resume)
        argv[k++] = "--resume";
    argv[k] = NULL;
}

/* A preemption notice to one rank (SIGUSR1, as Slurm's --signal sends): every rank agrees on the
 * next step boundary, rank 0 saves it, all exit 75; the same command with --resume then ends as
 * the run would have uninterrupted, bit for bit (losses, model.bin or model.safetensors,
 * state.bin). */
static void preempt_one_rank(const char *tag, const char *model)
{
    char cut[700], whole[700], a[900];
    const char *run[64];
    snprintf(cut, sizeof cut, "%s/preempted%s", tmp_root, tag);
    snprintf(whole, sizeof whole, "%s/uninterrupted%s", tmp_root, tag);
    preempt_args(run, cut, model, 0);
    vkg_test_proc p;
    start(&p, run);
    double end = vkg_test_now() + 180;
    while (vkg_test_now() < end && !p.done &&
           !(strstr(p.buf[0], "[rank 0] step 3/") && strstr(p.buf[0], "rank 1 is pid ")))
        vkg_test_proc_pump(&p, 0.05, NULL);
    char *r1 = strstr(p.buf[0], "rank 1 is pid ");
    if (!r1 || !strstr(p.buf[0], "[rank 0] step 3/") || p.done) {
        kill(p.pid, SIGKILL);
        vkg_test_proc_wait(&p, 30);
        fail_msg("the ranks did not start training; output:\n%s", p.buf[0]);
    }
    assert_int_equal(kill((pid_t)atoi(r1 + strlen("rank 1 is pid ")), SIGUSR1), 0);
    int rc = vkg_test_proc_wait(&p, 120);
    printf("%s", p.buf[0]);
    assert_int_equal(rc, 75);
    expect_output(&p, "[rank 1] stopping on signal 10 after the current step");
    expect_output(&p, "[rank 0] stopping after the current step: another rank was signalled");
    snprintf(a, sizeof a, "%s/log.jsonl", cut);
    long steps = count_lines(a);
    assert_true(steps >= 3 && steps < 60);
    assert_int_equal(newest_complete(cut), steps); /* saved at the step both stopped after */
    vkg_test_proc_free(&p);

    preempt_args(run, cut, model, 1);
    start(&p, run);
    assert_int_equal(vkg_test_proc_wait(&p, 240), 0);
    char resumed[64];
    snprintf(resumed, sizeof resumed, "[rank 0] resumed at step %ld", steps);
    expect_output(&p, resumed);
    vkg_test_proc_free(&p);
    preempt_args(run, whole, model, 0);
    start(&p, run);
    assert_int_equal(vkg_test_proc_wait(&p, 240), 0);
    vkg_test_proc_free(&p);
    expect_same_run(cut, whole, 60);
    printf("%s: preempted after step %ld, resumed to 60: bitwise the uninterrupted run\n",
           model ? "llama" : "gpt2", steps);
}

static void test_preempt_one_rank_resumes_bitwise(void **state)
{
    (void)state;
    preempt_one_rank("", NULL);
}

/* The same on a Llama-family model (its checkpoints: config.json and model.safetensors). */
static void test_preempt_one_rank_resumes_bitwise_llama(void **state)
{
    (void)state;
    char cfg[700];
    preempt_one_rank("_llama", llama_config(cfg, sizeof cfg));
}

/* The "rank_batch" of each step of dir/log.jsonl into split[step - 1] (at most n steps); the
 * number of lines. */
static int splits_of(const char *dir, char split[][16], int n)
{
    char path[800];
    snprintf(path, sizeof path, "%s/log.jsonl", dir);
    size_t len = 0;
    char *log = slurp(path, &len);
    assert_non_null(log);
    int lines = 0;
    for (char *at = log; (at = strstr(at, "\"rank_batch\":\"")) && lines < n; at++, lines++) {
        at += strlen("\"rank_batch\":\"");
        snprintf(split[lines], 16, "%.*s", (int)strcspn(at, "\""), at);
    }
    free(log);
    return lines;
}

/* Remove dir/step_<n> for every n > step (a chain of fixed runs resumes at step). */
static void drop_after(const char *dir, int step)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *de; (de = readdir(d));) {
        long n;
        if (sscanf(de->d_name, "step_%ld", &n) != 1 || n <= step)
            continue;
        char sub[1400], file[1500];
        snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name);
        static const char *const names[] = {"model.bin", "state.bin", "DONE"};
        for (int i = 0; i < 3; i++) {
            snprintf(file, sizeof file, "%s/%s", sub, names[i]);
            unlink(file);
        }
        assert_int_equal(rmdir(sub), 0);
    }
    closedir(d);
}

/* --rank-batch auto through `vkgpt launch`, rank 1 slowed by the test-only delay: the split moves
 * rows to rank 0 after the calibration, and the run's losses and final model equal, byte for
 * byte, a chain of fixed --rank-batch runs with the splits its log records, each resumed from the
 * previous one's checkpoint at the step where the split changed. */
static void test_rank_batch_auto_bitwise(void **state)
{
    (void)state;
    enum { STEPS = 9 };
    char dir[700], fixed[700];
    snprintf(dir, sizeof dir, "%s/auto", tmp_root);
    snprintf(fixed, sizeof fixed, "%s/auto_fixed", tmp_root);
#define AUTO_ARGS(d)                                                                               \
    "launch", "-n", "2", "--transport", "ipc", "--", "train", "--data", data_path, "--layers",     \
        "2", "--heads", "2", "--channels", "32", "--ctx", "32", "--seq", "32", "--lr", "3e-3",     \
        "--sample-len", "0", "--comm-timeout", "10", "--validation", "--steps", "9",               \
        "--total-batch", "256", "--ckpt-dir", d, "--ckpt-every", "1", "--keep", "0"
    const char *run[] = {AUTO_ARGS(dir), "--batch",           "2", "--rank-batch",
                         "auto",         "--rebalance-every", "3", NULL};
    const char *const slow[] = {"VKG_TEST_ROW_DELAY_MS=0,40", NULL};
    vkg_test_proc p;
    start_env(&p, run, slow);
    int rc = vkg_test_proc_wait(&p, 240);
    printf("%s", p.buf[0]);
    assert_int_equal(rc, 0);
    expect_output(&p, "[rank 0] step 3: --rank-batch auto moves from 2,2 to 3,1");
    vkg_test_proc_free(&p);
    char split[STEPS][16];
    assert_int_equal(splits_of(dir, split, STEPS), STEPS);
    assert_string_equal(split[0], "2,2");
    assert_string_equal(split[3], "3,1");
    int segments = 0;
    for (int s0 = 0; s0 < STEPS; segments++) {
        int s1 = s0 + 1;
        while (s1 < STEPS && !strcmp(split[s1], split[s0]))
            s1++;
        if (s0 > 0)
            drop_after(fixed, s0);
        const char *chain[] = {AUTO_ARGS(fixed), "--rank-batch", split[s0],
                               s0 > 0 ? "--resume" : NULL, NULL};
        start(&p, chain);
        rc = vkg_test_proc_wait(&p, 240);
        if (rc != 0)
            fail_msg("the fixed run with --rank-batch %s from step %d: exit %d\n%s", split[s0], s0,
                     rc, p.buf[0]);
        vkg_test_proc_free(&p);
        s0 = s1;
    }
#undef AUTO_ARGS
    printf("--rank-batch auto: %d splits, bitwise the fixed chain\n", segments);
    expect_same_run(dir, fixed, STEPS);
}

/* Over ZeroMQ alone (tcp, no shared memory), rank 0 works 4 x 300 ms per step before its first
 * call while rank 1 waits, past --comm-timeout 1: a step of any length between calls is never a
 * fault, and the stall notices rank 1 sends must not fail rank 0's later calls once the stall is
 * over (this run died at step 1 or 2 with "stopped after other ranks waited for this one"). */
static void test_long_step_over_zmq(void **state)
{
    (void)state;
    const char *run[] = {"launch",  "-n",
                         "2",       "--transport",
                         "zmq",     "--",
                         "train",   "--data",
                         data_path, "--layers",
                         "2",       "--heads",
                         "2",       "--channels",
                         "64",      "--ctx",
                         "32",      "--batch",
                         "4",       "--seq",
                         "32",      "--steps",
                         "6",       "--sample-len",
                         "0",       "--comm-timeout",
                         "1",       "--validation",
                         NULL};
    const char *const slow[] = {"VKG_TEST_ROW_DELAY_MS=300,0", NULL};
    vkg_test_proc p;
    start_env(&p, run, slow);
    int rc = vkg_test_proc_wait(&p, 240);
    if (rc != 0)
        fail_msg("a step longer than --comm-timeout over tcp: exit %d\n%s", rc, p.buf[0]);
    expect_output(&p, "[rank 0] step 6/6");
    expect_output(&p, "shared memory off");
    vkg_test_proc_free(&p);
}

/* Pump p until needle is in its output (after offset from), p ends, or limit s pass; a pointer to
 * it, or NULL. */
static const char *wait_for(vkg_test_proc *p, const char *needle, size_t from, double limit)
{
    double end = vkg_test_now() + limit;
    while (vkg_test_now() < end && !p->done && !strstr(p->buf[0] + from, needle))
        vkg_test_proc_pump(p, 0.05, NULL);
    return strstr(p->buf[0] + from, needle);
}

/* Start launch with args, wait for a complete checkpoint of step 3 or later, send rank `who`
 * signal sig (by the pid launch printed after offset from); returns the signal's time. */
static double signal_after_checkpoint(vkg_test_proc *p, const char *ckpt, int who, size_t from,
                                      int sig)
{
    char line[32];
    snprintf(line, sizeof line, "rank %d is pid ", who);
    double end = vkg_test_now() + 180;
    const char *pid_line = NULL;
    while (vkg_test_now() < end && !p->done &&
           (newest_complete(ckpt) < 3 || !(pid_line = strstr(p->buf[0] + from, line))))
        vkg_test_proc_pump(p, 0.05, NULL);
    if (!pid_line || newest_complete(ckpt) < 3) {
        kill(p->pid, SIGKILL);
        vkg_test_proc_wait(p, 30);
        fail_msg("no checkpoint or no pid of rank %d; output:\n%s", who, p->buf[0]);
    }
    vkg_test_proc_pump(p, 0.3, NULL); /* mid-training */
    assert_int_equal(kill((pid_t)atoi(pid_line + strlen(line)), sig), 0);
    return vkg_test_now();
}

static double kill_after_checkpoint(vkg_test_proc *p, const char *ckpt, int who, size_t from)
{
    return signal_after_checkpoint(p, ckpt, who, from, SIGKILL);
}

#define ELASTIC_ARGS(dir)                                                                          \
    TRAIN_ARGS, "--steps", "60", "--total-batch", "128", "--ckpt-dir", dir, "--ckpt-every", "3",   \
        "--keep", "0"

/* The elastic runs' command line into argv (NULL-terminated): launch over ipc with n ranks (and
 * restarts, when given), ELASTIC_ARGS's run of 60 steps checkpointed every 3 into dir, the model
 * GPT-2's sizes or (model given) that config.json; resume adds --resume. */
static void elastic_args(const char **argv, int n, const char *restarts, const char *dir,
                         const char *model, int resume)
{
    int k = 0;
    const char *head[] = {"launch", "-n", n == 1 ? "1" : "2", "--transport", "ipc"};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
        argv[k++] = head[i];
    if (restarts)
        argv[k++] = "--max-restarts", argv[k++] = restarts;
    argv[k++] = "--";
    k = put_train_args(argv, k, model);
    const char *tail[] = {"--steps",      "60", "--total-batch", "128", "--ckpt-dir", dir,
                          "--ckpt-every", "3",  "--keep",        "0"};
    for (size_t i = 0; i < sizeof tail / sizeof tail[0]; i++)
        argv[k++] = tail[i];
    if (resume)
        argv[k++] = "--resume";
    argv[k] = NULL;
}

/* An elastic job loses rank 1 and goes on with rank 0 alone from the newest complete checkpoint,
 * bitwise as that checkpoint resumed by hand on 1 rank; model: NULL (GPT-2) or a config.json. */
static void elastic_restart(const char *tag, const char *model)
{
    char el[700], hand[700], cmd[8192];
    const char *args[64];
    snprintf(el, sizeof el, "%s/elastic%s", tmp_root, tag);
    snprintf(hand, sizeof hand, "%s/elastic%s_by_hand", tmp_root, tag);
    elastic_args(args, 2, "1", el, model, 0);
    vkg_test_proc p;
    start(&p, args);
    double killed = kill_after_checkpoint(&p, el, 1, 0);
    const char *r = wait_for(&p, "[rank 0] resumed at step ", 0, 120);
    if (!r)
        fail_msg("the job did not resume; output:\n%s", p.buf[0]);
    long S = atol(r + strlen("[rank 0] resumed at step "));
    char first[48];
    snprintf(first, sizeof first, "[rank 0] step %ld/", S + 1);
    const char *went_on = wait_for(&p, first, 0, 120);
    double lost_s = vkg_test_now() - killed;
    int rc = vkg_test_proc_wait(&p, 240);
    printf("%s", p.buf[0]);
    assert_non_null(went_on);
    printf("elastic restart: %.2f s from the kill of rank 1 to step %ld, the first after it\n",
           lost_s, S + 1);
    assert_int_equal(rc, 0);
    expect_output(&p, "vkgpt launch: lost rank 1 of 2 was killed by signal 9");
    expect_output(&p, "restart 1 of 1 with 1 rank, from the newest complete checkpoint");
    vkg_test_proc_free(&p);
    assert_true(S >= 3 && S < 60);
    /* by hand: that checkpoint, its run's settings and log, resumed on 1 rank */
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s' && cp -r '%s/step_%08ld' '%s/run.json' '%s/' && head -n %ld "
             "'%s/log.jsonl' > '%s/log.jsonl'",
             hand, el, S, el, hand, S, el, hand);
    assert_int_equal(system(cmd), 0);
    elastic_args(args, 1, NULL, hand, model, 1);
    start(&p, args);
    assert_int_equal(vkg_test_proc_wait(&p, 240), 0);
    vkg_test_proc_free(&p);
    expect_same_run(el, hand, 60);
    printf("the elastic job's steps %ld-60 are bitwise those of the checkpoint resumed by hand\n",
           S + 1);
}

static void test_elastic_restart(void **state)
{
    (void)state;
    elastic_restart("", NULL);
}

/* The same on a Llama-family model (GQA 2/1, RMSNorm, rope, SwiGLU, untied head), whose
 * checkpoints hold config.json and model.safetensors. */
static void test_elastic_restart_llama(void **state)
{
    (void)state;
    char cfg[700];
    elastic_restart("_llama", llama_config(cfg, sizeof cfg));
}

/* Rank 1 frozen by SIGSTOP: rank 0 fails first, naming it (a witness); the launcher sees rank 1
 * stopped, drops it (not rank 0) and goes on with rank 0 from the newest checkpoint. */
static void test_elastic_freeze_drops_the_frozen_rank(void **state)
{
    (void)state;
    char dir[700];
    snprintf(dir, sizeof dir, "%s/elastic_freeze", tmp_root);
    const char *args[] = {"launch",  "-n", "2",  "--transport",     "ipc", "--max-restarts", "1",
                          "--grace", "2",  "--", ELASTIC_ARGS(dir), NULL};
    vkg_test_proc p;
    start(&p, args);
    signal_after_checkpoint(&p, dir, 1, 0, SIGSTOP);
    int rc = vkg_test_proc_wait(&p, 240);
    printf("%s", p.buf[0]);
    assert_int_equal(rc, 0);
    expect_output(&p, "vkgpt launch: rank 1 is frozen (stopped, it runs no more)");
    expect_output(&p, "vkgpt launch: lost rank 1 of 2 froze");
    expect_output(&p, "restart 1 of 1 with 1 rank, from the newest complete checkpoint");
    expect_output(&p, "[rank 0] step 60/60");
    vkg_test_proc_free(&p);
}

/* A second loss beyond --max-restarts ends the job naming both; --min-ranks refuses to shrink
 * below it; --max-restarts without train's --total-batch is refused before anything starts. */
static void test_elastic_limits(void **state)
{
    (void)state;
    char dir[700];
    snprintf(dir, sizeof dir, "%s/elastic_twice", tmp_root);
    const char *args[] = {"launch",         "-n", "2",  "--transport",     "ipc",
                          "--max-restarts", "1",  "--", ELASTIC_ARGS(dir), "--steps",
                          "100000",         NULL};
    vkg_test_proc p;
    start(&p, args);
    kill_after_checkpoint(&p, dir, 1, 0);
    const char *re = wait_for(&p, "restart 1 of 1 with 1 rank", 0, 120);
    if (!re)
        fail_msg("no restart; output:\n%s", p.buf[0]);
    size_t from = (size_t)(re - p.buf[0]);
    wait_for(&p, "[rank 0] resumed at step", from, 120);
    kill_after_checkpoint(&p, dir, 0, from);
    int rc = vkg_test_proc_wait(&p, 120);
    printf("%s", p.buf[0]);
    assert_true(rc != 0);
    expect_output(&p, "giving up after 1 restart (--max-restarts 1): rank 1 of 2 was killed by "
                      "signal 9");
    expect_output(&p, ", then rank 0 of 1 was killed by signal 9");
    vkg_test_proc_free(&p);

    snprintf(dir, sizeof dir, "%s/elastic_min", tmp_root);
    const char *floor[] = {"launch",          "-n",      "2",           "--transport", "ipc",
                           "--max-restarts",  "1",       "--min-ranks", "2",           "--",
                           ELASTIC_ARGS(dir), "--steps", "100000",      NULL};
    start(&p, floor);
    kill_after_checkpoint(&p, dir, 1, 0);
    rc = vkg_test_proc_wait(&p, 120);
    printf("%s", p.buf[0]);
    assert_true(rc != 0);
    expect_output(&p, "not restarting: 1 ranks would remain, fewer than --min-ranks 2; lost rank "
                      "1 of 2 was killed by signal 9");
    assert_null(strstr(p.buf[0], "restart 1 of 1"));
    vkg_test_proc_free(&p);

    const char *no_total[] = {"launch",     "-n", "2", "--max-restarts", "1", "--", TRAIN_ARGS,
                              "--ckpt-dir", dir,  NULL};
    start(&p, no_total);
    assert_int_equal(vkg_test_proc_wait(&p, 60), 2);
    expect_output(&p, "train needs --ckpt-dir (where the checkpoints are) and --total-batch");
    vkg_test_proc_free(&p);
}

/* Reap the child `pid` (this process is the ranks' subreaper) when it has ended; 1 once reaped. */
static int reaped(pid_t pid, int *status)
{
    return waitpid(pid, status, WNOHANG) == pid;
}

/* Killing the launcher itself (SIGKILL: it cannot forward anything) must not leave its ranks
 * training unwatched: the kernel signals them when it dies, and they stop within a bound, after
 * the same step, with rank 0's checkpoint of the last logged step. This process is made the
 * ranks' subreaper so that it sees them end and reaps them. */
static void test_killed_launcher_takes_its_ranks(void **state)
{
    (void)state;
    char ckpt[700], path[800];
    snprintf(ckpt, sizeof ckpt, "%s/orphans", tmp_root);
    const char *args[] = {"launch", "-n",           "2",       "--transport", "ipc",
                          "--",     TRAIN_ARGS,     "--steps", "1000000",     "--ckpt-dir",
                          ckpt,     "--ckpt-every", "1000",    NULL};
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    vkg_test_proc p;
    start(&p, args);
    double end = vkg_test_now() + 180;
    while (vkg_test_now() < end && !p.done && !strstr(p.buf[0], "[rank 0] step 3/"))
        vkg_test_proc_pump(&p, 0.2, NULL);
    char *r0 = strstr(p.buf[0], "rank 0 is pid "), *r1 = strstr(p.buf[0], "rank 1 is pid ");
    if (!r0 || !r1 || !strstr(p.buf[0], "[rank 0] step 3/")) {
        kill(p.pid, SIGKILL);
        vkg_test_proc_wait(&p, 30);
        fail_msg("the ranks did not start training; output:\n%s", p.buf[0]);
    }
    pid_t rank[2] = {(pid_t)atoi(r0 + 14), (pid_t)atoi(r1 + 14)};
    assert_true(rank[0] > 0 && rank[1] > 0);
    assert_int_equal(kill(p.pid, SIGKILL), 0);
    vkg_test_proc_wait(&p, 30);
    double t0 = vkg_test_now(), bound = 30.0;
    int gone[2] = {0, 0}, status[2] = {0, 0};
    while (!(gone[0] && gone[1]) && vkg_test_now() < t0 + bound) {
        for (int k = 0; k < 2; k++)
            gone[k] = gone[k] || reaped(rank[k], &status[k]);
        usleep(50000);
    }
    double took = vkg_test_now() - t0;
    for (int k = 0; k < 2; k++)
        if (!gone[k]) { /* the test's own clean-up: they would train for a million steps */
            kill(rank[k], SIGKILL);
            waitpid(rank[k], NULL, 0);
        }
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    printf("%s", p.buf[0]);
    if (!gone[0] || !gone[1])
        fail_msg("rank(s)%s%s still running %.0f s after the launcher was killed",
                 gone[0] ? "" : " 0", gone[1] ? "" : " 1", bound);
    printf("both ranks ended %.2f s after the launcher was killed (wait status %d, %d)\n", took,
           status[0], status[1]);
    /* they stopped as on SIGTERM: cleanly (exit 75, a preemption: saved, not finished), rank 0
     * with a checkpoint of the last logged step */
    for (int k = 0; k < 2; k++)
        assert_true(WIFEXITED(status[k]) && WEXITSTATUS(status[k]) == 75);
    snprintf(path, sizeof path, "%s/log.jsonl", ckpt);
    long steps = count_lines(path);
    assert_true(steps >= 3);
    assert_int_equal(newest_complete(ckpt), steps);
    vkg_test_proc_free(&p);
}

static void test_kill_rank_ipc(void **state)
{
    (void)state;
    kill_rank_and_resume("ipc", 0);
}

/* The same with the two ranks as the two stages of a pipeline: a dead stage stops the job, and
 * the gathered checkpoint resumes. */
static void test_kill_stage_ipc(void **state)
{
    (void)state;
    kill_rank_and_resume("ipc", 1);
}

static void test_kill_rank_tcp(void **state)
{
    (void)state;
    kill_rank_and_resume("tcp", 0);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_launch_two_ranks_train),
        cmocka_unit_test(test_launch_four_ranks_pick_shm),
        cmocka_unit_test(test_launch_zero),
        cmocka_unit_test(test_launch_grad_bf16),
        cmocka_unit_test(test_launch_diloco),
        cmocka_unit_test(test_launcher_variables),
        cmocka_unit_test(test_kill_rank_ipc),
        cmocka_unit_test(test_kill_rank_tcp),
        cmocka_unit_test(test_kill_stage_ipc),
        cmocka_unit_test(test_killed_launcher_takes_its_ranks),
        cmocka_unit_test(test_preempt_one_rank_resumes_bitwise),
        cmocka_unit_test(test_preempt_one_rank_resumes_bitwise_llama),
        cmocka_unit_test(test_rank_batch_auto_bitwise),
        cmocka_unit_test(test_long_step_over_zmq),
        cmocka_unit_test(test_elastic_restart),
        cmocka_unit_test(test_elastic_restart_llama),
        cmocka_unit_test(test_elastic_limits),
        cmocka_unit_test(test_elastic_freeze_drops_the_frozen_rank),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
