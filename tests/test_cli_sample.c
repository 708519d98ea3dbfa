/* `vkgpt sample` never lets a model write control codes to a terminal. The model is crafted (an
 * llm.c file written here, byte-level vocabulary): whatever the context, it samples uniformly
 * among ESC, BEL, backspace, CR, the C1 control 0x9b (CSI), 0xc2 (so that 0xc2 0x9b, U+009B, the
 * C1 CSI in UTF-8, also comes out) and the letters of "A[2Jm"; every other token is e^-30 times
 * less likely. Through the built binary (VKGPT_BIN), with the Khronos validation layer forced on
 * through the loader and its log checked:
 *  - into a pipe the text is the model's bytes, raw: ESC and the other controls are there;
 *  - on a pseudo-terminal no ESC, BEL, backspace or 0x9b byte reaches it: they are shown as
 *    "\x1b", "\x07", ...; the same run with --raw writes them raw again;
 *  - under `vkgpt launch` on a pseudo-terminal (the rank writes into a pipe, so raw) the
 *    launcher relays the lines escaped: no such byte reaches the terminal either. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testproc.h"
#include "testutil.h"
#include "vkgpt/io.h"

#ifndef VKGPT_BIN
#error "VKGPT_BIN (the path of the vkgpt binary) must be defined by the build"
#endif

#define CAP 512
static char tmp_root[CAP - 100], model_path[CAP], vlog_path[CAP];

static const unsigned char chosen[] = {0x1b, 0x07, 0x08, 0x0d, 0x9b, 0xc2, 'A', '[', '2', 'J', 'm'};

/* The model: every weight zero except the final layernorm's bias (1 in channel 0), so the last
 * hidden state is e0 at every position, and wte's channel 0, the logits: 0 for the chosen bytes,
 * -30 for the rest (end-of-text included). */
static int write_model(void)
{
    vkg_model_config c = {.max_seq_len = 64,
                          .vocab_size = 257,
                          .padded_vocab_size = vkg_model_pad_vocab(257),
                          .num_layers = 1,
                          .num_heads = 1,
                          .channels = 8};
    size_t n = vkg_model_num_params(&c);
    vkg_param_table pt;
    float *p = calloc(n, sizeof *p);
    if (!p)
        return -1;
    vkg_model_params(&c, &pt);
    for (int v = 0; v < c.vocab_size; v++)
        p[(size_t)v * (size_t)c.channels] = memchr(chosen, v, sizeof chosen) ? 0.0f : -30.0f;
    p[pt.t[15].offset] = 1.0f; /* lnfb is the last tensor */
    vkg_status st = vkg_modelfile_write(model_path, &c, p);
    free(p);
    return st == VKG_OK ? 0 : -1;
}

static int group_setup(void **state)
{
    (void)state;
    if (vkg_test_tmp_make(tmp_root, sizeof tmp_root, "vkg_test_cli_sample"))
        return -1;
    snprintf(model_path, sizeof model_path, "%s/controls.bin", tmp_root);
    snprintf(vlog_path, sizeof vlog_path, "%s/validation.log", tmp_root);
    if (write_model())
        return -1;
    return vkg_test_validation_force(tmp_root, vlog_path, 1);
}

static int group_teardown(void **state)
{
    (void)state;
    return vkg_test_tmp_remove(tmp_root);
}

static size_t count_byte(const char *s, size_t n, unsigned char b)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += (unsigned char)s[i] == b;
    return k;
}

/* Run `vkgpt sample` on a pseudo-terminal (extra: "--raw" or NULL), alone or as the one rank of
 * `vkgpt launch`; its whole output in *out. */
static size_t run_on_terminal(const char *extra, int launch, char **out)
{
    const char *sample[] = {
        VKGPT_BIN, "launch",   "-n",          "1",    "--transport",   "ipc", "--",      "sample",
        "--ckpt",  model_path, "--tokenizer", "byte", "--temperature", "1",   "--top-k", "0",
        "--len",   "400",      "--seed",      "9",    extra,           NULL};
    const char **argv = launch ? sample : sample + 6;
    argv[0] = VKGPT_BIN;
    int master = -1;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    assert_true(pid >= 0);
    if (pid == 0) {
        execv(VKGPT_BIN, (char *const *)argv);
        _exit(127);
    }
    char *buf = calloc(1, 1);
    size_t n = 0;
    int done = 0;
    double t0 = vkg_test_now();
    while (!done && vkg_test_now() < t0 + 120) {
        struct pollfd pfd = {.fd = master, .events = POLLIN};
        if (poll(&pfd, 1, 100) > 0) {
            char chunk[4096];
            ssize_t got = read(master, chunk, sizeof chunk);
            if (got > 0) {
                char *nb = realloc(buf, n + (size_t)got + 1);
                assert_non_null(nb);
                memcpy(nb + n, chunk, (size_t)got);
                n += (size_t)got;
                nb[n] = '\0';
                buf = nb;
            } else {
                done = 1; /* EIO once the child is gone */
            }
        }
    }
    int st = 0;
    if (!done)
        kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    close(master);
    if (!done)
        fail_msg("vkgpt sample on a terminal did not finish in time");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("vkgpt sample on a terminal failed (status %d): %s", st, buf);
    *out = buf;
    return n;
}

static void test_pipe_gets_raw_bytes(void **state)
{
    (void)state;
    vkg_test_proc p;
    const char *const args[] = {"sample",        "--ckpt", model_path, "--tokenizer", "byte",
                                "--temperature", "1",      "--top-k",  "0",           "--len",
                                "400",           "--seed", "9",        NULL};
    vkg_test_proc_start(&p, args, NULL);
    assert_int_equal(vkg_test_proc_wait(&p, 120), 0);
    size_t esc = count_byte(p.buf[0], p.len[0], 0x1b);
    printf("into a pipe: %zu bytes, %zu ESC, %zu BEL, %zu 0x9b\n", p.len[0], esc,
           count_byte(p.buf[0], p.len[0], 0x07), count_byte(p.buf[0], p.len[0], 0x9b));
    assert_true(esc > 0 && count_byte(p.buf[0], p.len[0], 0x9b) > 0);
    assert_null(strstr(p.buf[0], "\\x1b"));
    assert_null(strstr(p.buf[0], "sampling 400 tokens...")); /* progress only on a terminal */
    vkg_test_validation_clean(vlog_path, 1);
    vkg_test_proc_free(&p);
}

static void test_terminal_gets_escapes(void **state)
{
    (void)state;
    char *out = NULL;
    size_t n = run_on_terminal(NULL, 0, &out);
    size_t shown = 0;
    for (const char *q = out; (q = strstr(q, "\\x1b")); q++)
        shown++;
    printf("on a terminal: %zu bytes, %zu ESC shown as \\x1b\n", n, shown);
    const unsigned char never[4] = {0x1b, 0x07, 0x08, 0x9b};
    for (int i = 0; i < 4; i++)
        if (count_byte(out, n, never[i]))
            fail_msg("byte 0x%02x reached the terminal:\n%s", never[i], out);
    assert_non_null(strstr(out, "\\x1b"));
    assert_non_null(strstr(out, "\\x9b"));
    assert_non_null(strstr(out, "sampling 400 tokens...")); /* said before the wait */
    vkg_test_validation_clean(vlog_path, 1);
    free(out);
    n = run_on_terminal("--raw", 0, &out);
    printf("on a terminal with --raw: %zu bytes, %zu ESC\n", n, count_byte(out, n, 0x1b));
    assert_true(count_byte(out, n, 0x1b) > 0);
    assert_null(strstr(out, "\\x1b"));
    vkg_test_validation_clean(vlog_path, 1);
    free(out);
}

static void test_launch_terminal_gets_escapes(void **state)
{
    (void)state;
    char *out = NULL;
    size_t n = run_on_terminal(NULL, 1, &out);
    printf("under launch on a terminal: %zu bytes\n", n);
    const unsigned char never[4] = {0x1b, 0x07, 0x08, 0x9b};
    for (int i = 0; i < 4; i++)
        if (count_byte(out, n, never[i]))
            fail_msg("byte 0x%02x reached the terminal through launch:\n%s", never[i], out);
    assert_non_null(strstr(out, "[rank 0] "));
    assert_non_null(strstr(out, "\\x1b"));
    vkg_test_validation_clean(vlog_path, 1);
    free(out);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pipe_gets_raw_bytes),
        cmocka_unit_test(test_terminal_gets_escapes),
        cmocka_unit_test(test_launch_terminal_gets_escapes),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
