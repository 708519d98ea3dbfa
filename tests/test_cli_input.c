/* The CLI against bad input, through the built binary (VKGPT_BIN, set by CMake):
 *  - a table of bad flag values and flag conflicts, for every subcommand: each exits 2 with a
 *    message naming the flag, the value and the valid range (or both sides of the conflict);
 *    good values at the ends of the ranges still work, and `plan` splits GPT-2 124M as expected
 *    (over two pipeline stages, and its AdamW over two ZeRO-1 ranks);
 *  - FIFOs, /dev/zero and folders given as data, validation data, model, tokenizer, vocabulary,
 *    prepare input or checkpoint are refused at once, naming the file and what it is;
 *  - binary garbage is refused by `train` and by `prepare` with the same message;
 *  - a crafted vocabulary's terminal escapes reach stderr escaped (\x1b), never raw;
 *  - SIGINT or SIGTERM while a large text file loads ends `train` within a bound, with
 *    "interrupted while loading FILE", exit 130 (SIGINT) or 75 (SIGTERM, a preemption to
 *    retry), and nothing written.
 * Every child runs under the Khronos validation layer (forced on through the loader, logging to a
 * file that must hold no error or warning), with an address-space limit so that reading an endless
 * file fails fast instead of exhausting the machine, and is bounded in time and reaped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testproc.h"
#include "testutil.h"

#ifndef VKGPT_BIN
#error "VKGPT_BIN (the path of the vkgpt binary) must be defined by the build"
#endif

#define CAP 512
#ifndef CHILD_ADDRESS_SPACE /* bytes of address space each child may map */
#define CHILD_ADDRESS_SPACE (8ull << 30)
#endif

static char tmp_root[CAP - 100], text_path[CAP], fifo_path[CAP], garbage_path[CAP];
static char vocab_dir[CAP], fifo_vocab_dir[CAP], folder_path[CAP], vlog_path[CAP];
static const vkg_test_proc_opts child_opts = {.address_space = CHILD_ADDRESS_SPACE};

/* ---- files ----------------------------------------------------------------------------------- */

/* Sentences from a small vocabulary, `bytes` long. */
static void write_sentences(const char *path, size_t bytes)
{
    static const char *const words[] = {"the", "cat", "sat", "on",  "a",     "mat", "and", "dog",
                                        "ran", "to",  "big", "red", "house", "in",  "sun"};
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint64_t s = 12345;
    for (size_t n = 0; n < bytes;) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const char *w = words[(s >> 33) % 15];
        n += (size_t)fprintf(f, "%s%s", w, (s >> 20) % 8 ? " " : ".\n");
    }
    fclose(f);
}

/* Nothing the validation layer logged is an error, a warning or a performance message. */
static void expect_validation_clean(void)
{
    char *log = vkg_test_read_file(vlog_path, NULL);
    if (log && (strstr(log, "ERROR") || strstr(log, "WARNING") || strstr(log, "PERF")))
        fail_msg("the validation layer reported:\n%s", log);
    free(log);
    unlink(vlog_path);
}

static int group_setup(void **state)
{
    (void)state;
    if (vkg_test_tmp_make(tmp_root, sizeof tmp_root, "vkg_test_cli_input"))
        return -1;
    snprintf(text_path, sizeof text_path, "%s/tiny.txt", tmp_root);
    snprintf(fifo_path, sizeof fifo_path, "%s/pipe.txt", tmp_root);
    snprintf(garbage_path, sizeof garbage_path, "%s/garbage.dat", tmp_root);
    snprintf(folder_path, sizeof folder_path, "%s/folder.txt", tmp_root);
    snprintf(vocab_dir, sizeof vocab_dir, "%s/vocab", tmp_root);
    snprintf(fifo_vocab_dir, sizeof fifo_vocab_dir, "%s/fifo_vocab", tmp_root);
    snprintf(vlog_path, sizeof vlog_path, "%s/validation.log", tmp_root);
    write_sentences(text_path, 24000);
    if (mkfifo(fifo_path, 0600) || mkdir(folder_path, 0700) || mkdir(vocab_dir, 0700) ||
        mkdir(fifo_vocab_dir, 0700))
        return -1;
    /* Garbage: bytes of an LCG, a NUL among them at offset 517. */
    FILE *f = fopen(garbage_path, "wb");
    if (!f)
        return -1;
    uint32_t x = 7;
    for (int i = 0; i < 8192; i++) {
        x = x * 1664525u + 1013904223u;
        fputc(i == 517 ? 0 : 1 + (int)((x >> 24) % 255), f);
    }
    fclose(f);
    /* A vocabulary whose one key holds terminal escapes (clear screen, set the title, bell). */
    char path[CAP + 32];
    snprintf(path, sizeof path, "%s/encoder.json", vocab_dir);
    f = fopen(path, "wb");
    if (!f)
        return -1;
    fputs("{\"\\u001b[2J\\u001b]0;owned\\u0007\": 0}", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/vocab.bpe", vocab_dir);
    f = fopen(path, "wb");
    if (!f)
        return -1;
    fputs("#version: 0.2\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/encoder.json", fifo_vocab_dir);
    if (mkfifo(path, 0600))
        return -1;
    /* Force the Khronos layer on for every child, logging to a file. */
    char settings[CAP + 32];
    snprintf(settings, sizeof settings, "%s/vk_layer_settings.txt", tmp_root);
    f = fopen(settings, "w");
    if (!f)
        return -1;
    fprintf(f,
            "khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG\n"
            "khronos_validation.log_filename = %s\n"
            "khronos_validation.report_flags = info,warn,error,perf\n",
            vlog_path);
    fclose(f);
    setenv("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation", 1);
    setenv("VK_LAYER_SETTINGS_PATH", tmp_root, 1);
    unsetenv("VKGPT_DEVICE");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    return vkg_test_tmp_remove(tmp_root);
}

static void expect_contains(const char *what, const char *hay, const char *needle)
{
    if (needle && !strstr(hay, needle))
        fail_msg("%s does not contain '%s':\n%s", what, needle, hay);
}

/* ---- bad values and conflicts ---------------------------------------------------------------- */

/* Placeholders in the table, replaced by the paths of this run. */
#define TEXT "@text"
#define FIFO "@fifo"
#define VOCAB "@vocab"

typedef struct bad_row {
    const char *args[16]; /* NULL-terminated */
    const char *want[3];  /* in stderr; NULL ends */
} bad_row;

#define TINY                                                                                       \
    "--layers", "1", "--heads", "1", "--channels", "8", "--ctx", "8", "--batch", "2", "--seq", "8"

static const bad_row bad_rows[] = {
    /* train: numbers */
    {{"train", "--data", TEXT, "--total-batch", "-128"},
     {"--total-batch must be a whole number from 1 to 2147483647", "got '-128'"}},
    {{"train", "--data", TEXT, "--total-batch", "0"}, {"--total-batch", "got '0'"}},
    {{"train", "--data", TEXT, "--total-batch", "1e30"}, {"--total-batch", "got '1e30'"}},
    {{"train", "--data", TEXT, "--seed", "1e30"},
     {"--seed must be a whole number from 0 to 18446744073709551615", "got '1e30'"}},
    {{"train", "--data", TEXT, "--seed", "-1"}, {"--seed", "got '-1'"}},
    {{"train", "--data", TEXT, "--steps", "2.5"}, {"--steps", "from 0 to 1000000000", "'2.5'"}},
    {{"train", "--data", TEXT, "--lr", "inf"}, {"--lr must be a number from 0 to 10", "'inf'"}},
    {{"train", "--data", TEXT, "--lr", "3e-3x"}, {"--lr", "'3e-3x'"}},
    {{"train", "--data", TEXT, "--batch", "0"}, {"--batch", "from 1 to"}},
    {{"train", "--data", TEXT, "--comm-timeout", "1e9"}, {"--comm-timeout", "from 1 to 86400"}},
    {{"train", "--data", TEXT, "--master-port", "70000"}, {"--master-port", "from 1 to 65535"}},
    {{"train", "--data", TEXT, "--bucket-mb", "nan"}, {"--bucket-mb", "'nan'"}},
    {{"train", "--data", TEXT, "--base-batch", "-5"}, {"--base-batch", "from 1 to"}},
    {{"train", "--data", TEXT, "--resume=yes"}, {"--resume takes no value"}},
    {{"train", "--data", TEXT, "--rank-batch", "4,2,"}, {"--rank-batch wants sizes", "'4,2,'"}},
    {{"train", "--data", TEXT, "--world-size", "2", "--rank", "0", "--master-addr", "0.0.0.0"},
     {"master address 0.0.0.0", "every interface", "--listen-all"}},
    /* train: conflicts */
    {{"train", "--data", TEXT, "--init", "m.bin", "--layers", "2"},
     {"--layers conflicts with --init"}},
    {{"train", "--data", TEXT, "--init", "m.bin", "--heads", "2"},
     {"--heads conflicts with --init"}},
    {{"train", "--data", TEXT, "--init", "m.bin", "--channels", "64"},
     {"--channels conflicts with --init"}},
    {{"train", "--data", TEXT, "--init", "m.bin", "--ctx", "64"}, {"--ctx conflicts with --init"}},
    {{"train", "--data", TEXT, "--init", "m.bin", "--vocab", "300"},
     {"--vocab conflicts with --init"}},
    {{"train", "--data", TEXT, "--init", "m.bin", "--resume", "--ckpt-dir", "ck"},
     {"--init conflicts with --resume"}},
    {{"train", "--data", TEXT, "--eval-every", "5"}, {"--eval-every needs --val-data"}},
    {{"train", "--data", TEXT, "--eval-batches", "2"}, {"--eval-batches needs --val-data"}},
    {{"train", "--data", TEXT, "--val-data", TEXT}, {"--val-data needs --eval-every"}},
    {{"train", "--data", TEXT, "--ckpt-every", "10"}, {"--ckpt-every needs --ckpt-dir"}},
    {{"train", "--data", TEXT, "--keep", "2"}, {"--keep needs --ckpt-dir"}},
    {{"train", "--data", TEXT, "--vocab-dir", VOCAB}, {"--vocab-dir needs --tokenizer gpt2"}},
    {{"train", "--data", TEXT, "--tokenizer", "byte", "--vocab-dir", VOCAB},
     {"--vocab-dir needs --tokenizer gpt2"}},
    {{"train", "--data", TEXT, "--base-batch", "512"}, {"--base-batch needs --lr-scale"}},
    {{"train", "--data", TEXT, "--rank-batch", "2", "--batch", "2"},
     {"--batch conflicts with --rank-batch"}},
    {{"train", "--data", TEXT, "--no-overlap", "--bucket-mb", "4"},
     {"--bucket-mb conflicts with --no-overlap"}},
    {{"train", "--data", TEXT, "--sample-len", "0", "--prompt", "the"},
     {"--prompt has no effect with --sample-len 0"}},
    {{"train", "--data", TEXT, "--sample-len", "0", "--sample-every", "10"},
     {"--sample-every has no effect with --sample-len 0"}},
    /* train: pipelines */
    {{"train", "--data", TEXT, "--pp", "0"}, {"--pp must be a whole number from 1 to 64"}},
    {{"train", "--data", TEXT, "--pp", "2", "--pp-layers", "2,x"}, {"--pp-layers wants", "'2,x'"}},
    {{"train", "--data", TEXT, "--pp-layers", "2,2"}, {"--pp-layers lists 2 stages but --pp is 1"}},
    {{"train", "--data", TEXT, "--pp-schedule", "zb"},
     {"--pp-schedule: 'zb' is not one of 1f1b, gpipe, zb-h1"}},
    {{"train", "--data", TEXT, "--pp-schedule", "gpipe"}, {"--pp-schedule needs --pp 2 or more"}},
    {{"train", "--data", TEXT, "--pp", "2", "--pp-schedule", "zb-h1", "--bucket-mb", "4"},
     {"--bucket-mb has no effect with --pp-schedule zb-h1"}},
    {{"train", "--data", TEXT, "--pp", "2", "--pp-schedule", "zb-h1", "--no-overlap"},
     {"--no-overlap has no effect with --pp-schedule zb-h1"}},
    /* train: ZeRO */
    {{"train", "--data", TEXT, "--zero", "1"},
     {"--zero 1 needs 2 or more data-parallel ranks", "vkgpt launch -n N"}},
    {{"train", "--data", TEXT, "--zero", "1", "--world-size", "1"},
     {"--zero 1 needs 2 or more data-parallel ranks"}},
    {{"train", "--data", TEXT, "--zero", "2"}, {"--zero must be a whole number from 0 to 1"}},
    {{"train", "--data", TEXT, "--zero", "1", "--pp", "2", "--world-size", "2", "--rank", "0"},
     {"--zero 1 needs 2 or more data-parallel ranks per pipeline stage"}},
    /* train: gradient exchange */
    {{"train", "--data", TEXT, "--grad-dtype", "fp16"},
     {"--grad-dtype: 'fp16' is not one of fp32, bf16"}},
    {{"train", "--data", TEXT, "--grad-dtype", "bf16"},
     {"--grad-dtype bf16 needs 2 or more data-parallel ranks"}},
    {{"train", "--data", TEXT, "--grad-dtype", "bf16", "--pp", "2", "--world-size", "2", "--rank",
      "0"},
     {"--grad-dtype bf16 needs 2 or more data-parallel ranks, got 1 (ranks / --pp)"}},
    /* train: loss scaling */
    {{"train", "--data", TEXT, "--loss-scale", "static"},
     {"--loss-scale: 'static' is not one of off, dynamic"}},
    {{"train", "--data", TEXT, "--loss-scale-init", "1024"},
     {"--loss-scale-init needs --loss-scale dynamic"}},
    {{"train", "--data", TEXT, "--loss-scale-window", "100"},
     {"--loss-scale-window needs --loss-scale dynamic"}},
    {{"train", "--data", TEXT, "--loss-scale", "dynamic", "--loss-scale-init", "1000"},
     {"--loss-scale-init must be a power of two from 1 to 2^127", "got 1000"}},
    {{"train", "--data", TEXT, "--loss-scale", "dynamic", "--loss-scale-init", "0.5"},
     {"--loss-scale-init must be a number from 1 to"}},
    /* train: DiLoCo */
    {{"train", "--data", TEXT, "--sync", "local"}, {"--sync: 'local' is not one of step, diloco"}},
    {{"train", "--data", TEXT, "--outer-dtype", "int8"}, {"--outer-dtype needs --sync diloco"}},
    {{"train", "--data", TEXT, "--inner-steps", "4"}, {"--inner-steps needs --sync diloco"}},
    {{"train", "--data", TEXT, "--fragments", "2"}, {"--fragments needs --sync diloco"}},
    {{"train", "--data", TEXT, "--outer-mix", "0.3"}, {"--outer-mix needs --sync diloco"}},
    {{"train", "--data", TEXT, "--sync", "diloco", "--outer-mix", "1"},
     {"--outer-mix must be a number from 0 to"}},
    {{"train", "--data", TEXT, "--sync", "diloco"},
     {"--sync diloco needs 2 or more data-parallel ranks, got 1"}},
    {{"train", "--data", TEXT, "--sync", "diloco", "--inner-steps", "0", "--world-size", "2",
      "--rank", "0"},
     {"--inner-steps must be >= 1"}},
    {{"train", "--data", TEXT, "--sync", "diloco", "--zero", "1", "--world-size", "2", "--rank",
      "0"},
     {"--sync diloco does not combine with --zero 1"}},
    {{"train", "--data", TEXT, "--sync", "diloco", "--pp", "2", "--outer-delay", "1",
      "--world-size", "4", "--rank", "0"},
     {"--outer-delay 1 does not combine with --pp 2"}},
    {{"train", "--data", TEXT, "--sync", "diloco", "--outer-dtype", "fp8"},
     {"--outer-dtype: 'fp8' is not one of fp32, bf16, int8"}},
    /* plan */
    {{"plan", "--pp", "2", "--pp-layers", "5"}, {"--pp-layers wants 2 layer counts", "'5'"}},
    {{"plan", "--preset", "none"}, {"--preset none needs --layers"}},
    {{"plan", "--total-batch", "1000"}, {"--total-batch 1000 is not a multiple of"}},
    {{"plan", "--zero", "1"}, {"--zero 1 needs --dp 2 or more"}},
    {{"plan", "--zero", "1", "--pp", "2"}, {"--zero 1 needs --dp 2 or more"}},
    {{"plan", "--dp", "0"}, {"--dp must be a whole number from 1 to 1024"}},
    {{"plan", "--driver", "foo"}, {"--driver: 'foo' is not one of none, nvidia, radv"}},
    {{"plan", "--max-alloc", "100"}, {"--max-alloc must be a whole number from 4096"}},
    {{"plan", "--memory", "-1"}, {"--memory", "'-1'"}},
    {{"plan", "--recompute", "all"}, {"--recompute: 'all' is not one of none, gelu"}},
    {{"train", "--data", TEXT, "--recompute", "all"}, {"--recompute: 'all' is not one of none"}},
    {{"plan", "--precision", "fp16"}, {"--precision: 'fp16' is not one of fp32, bf16"}},
    {{"train", "--data", TEXT, "--precision", "16"}, {"--precision: '16' is not one of fp32"}},
    {{"bench", "train", "--precision", "half"}, {"--precision: 'half' is not one of fp32, bf16"}},
    {{"plan", "--zero", "3", "--dp", "2"}, {"--zero must be a whole number from 0 to 1"}},
    /* sample */
    {{"sample", "--ckpt", TEXT, "--seed", "1e30"}, {"--seed", "'1e30'"}},
    {{"sample", "--ckpt", TEXT, "--len", "-1"}, {"--len must be a whole number from 0 to"}},
    {{"sample", "--ckpt", TEXT, "--temperature", "-0.5"}, {"--temperature", "from 0 to 100"}},
    {{"sample", "--ckpt", TEXT, "--tokenizer", "byte", "--vocab-dir", VOCAB},
     {"--vocab-dir conflicts with --tokenizer byte"}},
    /* prepare */
    {{"prepare", "--shard-tokens", "0", TEXT},
     {"--shard-tokens must be a whole number from 1 to 2147483647", "got '0'"}},
    {{"prepare", "--shard-tokens", "1e30", TEXT}, {"--shard-tokens", "'1e30'"}},
    {{"prepare", "--val-frac", "1", TEXT}, {"--val-frac", "1 excluded"}},
    {{"prepare", "--val-frac", "nan", TEXT}, {"--val-frac must be a number from 0 to 1"}},
    {{"prepare", "--val-frac", "-0.5", TEXT}, {"--val-frac", "'-0.5'"}},
    {{"prepare", "--tokenizer", "bpe", TEXT}, {"--tokenizer: 'bpe' is not one of byte, gpt2"}},
    /* launch */
    {{"launch", "-n", "0", "--", "train"}, {"-n must be a whole number from 1 to 256"}},
    {{"launch", "-n", "1e30", "--", "train"}, {"-n", "'1e30'"}},
    {{"launch", "-n", "2", "--port", "70000", "--", "train"}, {"--port", "from 1 to 65535"}},
    {{"launch", "-n", "2", "--grace", "-1", "--", "train"}, {"--grace", "from 0 to 3600"}},
    {{"launch", "-n", "3", "--pp", "2", "--", "train"}, {"--pp 2 does not divide -n 3"}},
    {{"launch", "-n", "1", "--zero", "1", "--", "train"}, {"--zero 1 needs -n 2 or more"}},
    {{"launch", "-n", "2", "--grad-dtype", "f32", "--", "train"},
     {"--grad-dtype: 'f32' is not one of fp32, bf16"}},
    {{"launch", "-n", "2", "--pp", "2", "--zero", "1", "--", "train"},
     {"--zero 1 with --pp 2 needs -n 4 or more", "it has 1"}},
    /* bench */
    {{"bench", "allreduce", "-n", "1e30"}, {"-n must be a whole number from 1 to 64"}},
    {{"bench", "allreduce", "--timeout", "1e30"}, {"--timeout must be a number from 0.001 to"}},
    {{"bench", "allreduce", "--max", "1e30"}, {"--max", "'1e30'"}},
    {{"bench", "allreduce", "--iters", "5x"}, {"--iters", "'5x'"}},
    {{"bench", "allreduce", "--window", "99999999999"}, {"--window", "from 2 to 1024"}},
    {{"bench", "allreduce", "--dtype", "f64"}, {"--dtype: 'f64' is not one of f32, bf16, f16"}},
    {{"bench", "ops", "--iters", "1e30"}, {"--iters must be a whole number from 1 to"}},
    {{"bench", "ops", "--tiles", "8,8,8x"}, {"--tiles", "'8,8,8x'"}},
    {{"bench", "ops", "--tiles", "-1,8,8"}, {"--tiles", "'-1,8,8'"}},
    {{"bench", "ops", "--tiles", "64x64x16:4x4+dbl"}, {"unknown suffix '+dbl'", "+db:", "+sb:"}},
    {{"train", "--tiles", "nvidia-huge+db"}, {"'nvidia-huge+db': no such table entry", "+db"}},
    {{"bench", "dp", "--steps", "0"}, {"--steps must be a whole number from 1 to"}},
    {{"bench", "dp", "--ranks", "1,,2"}, {"--ranks wants", "'1,,2'"}},
    {{"bench", "dp", "--zero", "2"}, {"--zero must be a whole number from 0 to 1"}},
    {{"bench", "dp", "--grad-dtype", "half"}, {"--grad-dtype: 'half' is not one of fp32, bf16"}},
    {{"bench", "dp", "--fragments", "2"}, {"--fragments needs --inner-steps"}},
    {{"bench", "pp", "--stages", "1"}, {"--stages wants counts from 2 to 8", "'1'"}},
    {{"bench", "pp", "--schedule", "zb"}, {"--schedule must be 1f1b, gpipe, zb-h1", "'zb'"}},
    {{"bench", "pp", "--schedule", "1f1b,"}, {"--schedule must be 1f1b, gpipe, zb-h1", "'1f1b,'"}},
    {{"bench", "train", "--seed", "1e30"}, {"--seed", "'1e30'"}},
    {{"bench", "train", "--lr", "1e39"}, {"--lr must be a number from 0 to 10"}},
    {{"bench", "train", "--coopmat", "maybe"},
     {"--coopmat: 'maybe' is not one of off, on, emulate"}},
    {{"train", "--coopmat", "on"},
     {"--coopmat on runs the products of the bf16", "--precision bf16"}},
    {{"bench", "train", "--coopmat", "emulate"}, {"--coopmat emulate", "--precision bf16"}},
};

/* row's argument with the placeholders replaced */
static const char *arg_of(const char *a)
{
    return !strcmp(a, TEXT)    ? text_path
           : !strcmp(a, FIFO)  ? fifo_path
           : !strcmp(a, VOCAB) ? vocab_dir
                               : a;
}

static void test_bad_values_and_conflicts(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof bad_rows / sizeof bad_rows[0]; k++) {
        const bad_row *w = &bad_rows[k];
        const char *args[17] = {0};
        for (int i = 0; w->args[i]; i++)
            args[i] = arg_of(w->args[i]);
        vkg_test_proc p;
        vkg_test_proc_start(&p, args, &child_opts);
        int rc = vkg_test_proc_wait(&p, 60);
        if (rc != 2)
            fail_msg("row %zu: exit code %d, expected 2; stderr:\n%s", k, rc, p.buf[1]);
        for (int i = 0; i < 3 && w->want[i]; i++)
            expect_contains("stderr", p.buf[1], arg_of(w->want[i]));
        vkg_test_proc_free(&p);
    }
    expect_validation_clean();
}

/* Values at the ends of the ranges are taken: a 2-step accumulation and the largest seed. */
static void test_good_values(void **state)
{
    (void)state;
    vkg_test_proc p;
    const char *const train[] = {"train",         "--data", text_path, TINY,
                                 "--total-batch", "32",     "--seed",  "18446744073709551615",
                                 "--steps",       "1",      "--lr",    "3e-3",
                                 "--sample-len",  "0",      NULL};
    vkg_test_proc_start(&p, train, &child_opts);
    assert_int_equal(vkg_test_proc_wait(&p, 120), 0);
    expect_contains("stdout", p.buf[0], "x 2 accumulation = 32 tokens per step");
    expect_contains("stdout", p.buf[0], "step 1/1 ");
    vkg_test_proc_free(&p);
    expect_validation_clean();
    char out[CAP + 16];
    snprintf(out, sizeof out, "%s/prepared", tmp_root);
    const char *const prepare[] = {"prepare",        "--out", out,       "--val-frac", "0.5",
                                   "--shard-tokens", "1K",    text_path, NULL};
    vkg_test_proc_start(&p, prepare, &child_opts);
    assert_int_equal(vkg_test_proc_wait(&p, 60), 0);
    expect_contains("stdout", p.buf[0], "train_000000.bin (1024 tokens)");
    vkg_test_proc_free(&p);
    /* GPT-2 124M in two stages: the head costs 4.5 blocks, so the last stage gets 4 layers */
    const char *const plan[] = {"plan", "--preset",      "gpt2",  "--pp",
                                "2",    "--pp-schedule", "gpipe", NULL};
    vkg_test_proc_start(&p, plan, &child_opts);
    assert_int_equal(vkg_test_proc_wait(&p, 60), 0);
    expect_contains("stdout", p.buf[0], "124475904 parameters");
    expect_contains("stdout", p.buf[0], "    0  [ 0, 8)     2");
    expect_contains("stdout", p.buf[0], "    1  [ 8,12)     2");
    vkg_test_proc_free(&p);
    /* Under a 2 GiB driver limit the logits of 16 rows do not fit one allocation (exit 1, the
     * largest batch named); under 4 GiB and 16 GiB of memory, B = 8 fits and 15 is the most. */
    const char *const plan_amd[] = {"plan", "--batch", "16", "--driver", "amdvlk", NULL};
    vkg_test_proc_start(&p, plan_amd, &child_opts);
    assert_int_equal(vkg_test_proc_wait(&p, 60), 1);
    expect_contains("stderr", p.buf[1], "tensor logits needs 3296722944 bytes in one allocation");
    expect_contains("stderr", p.buf[1], "the largest --batch that fits is 10");
    vkg_test_proc_free(&p);
    const char *const plan_radv[] = {"plan", "--batch",  "8",  "--driver",
                                     "radv", "--memory", "16", NULL};
    vkg_test_proc_start(&p, plan_radv, &child_opts);
    assert_int_equal(vkg_test_proc_wait(&p, 60), 0);
    expect_contains("stdout", p.buf[0], "largest allocation: 4096.0 MiB (Mesa RADV");
    expect_contains("stdout", p.buf[0], " 9333.9      6     1572.0  yes");
    expect_contains("stdout", p.buf[0], "the largest --batch that fits 16.0 GiB is 15");
    vkg_test_proc_free(&p);
    /* ZeRO-1 over 2 ranks: each rank's AdamW is half of the unsharded 949.7 MiB, cut at the
     * norm's 64 partial sums of 1944960 parameters, on every device (32 each: 2 x 4 x 62238720
     * bytes of moments on rank 0, 2 x 4 x 62237184 on rank 1, and the norm's scratch) */
    const char *const zplan[] = {"plan", "--preset", "gpt2", "--dp", "2", "--zero", "1", NULL};
    vkg_test_proc_start(&p, zplan, &child_opts);
    assert_int_equal(vkg_test_proc_wait(&p, 60), 0);
    expect_contains("stdout", p.buf[0], "unsharded AdamW 949.7 MiB per rank");
    expect_contains("stdout", p.buf[0], "    0  [ 0,12)     1      474.8      474.8      474.8");
    expect_contains("stdout", p.buf[0], "    1  [ 0,12)     1      474.8      474.8      474.8");
    expect_contains("stdout", p.buf[0], "rank 0: the moments of parameters [0, 62238720)");
    expect_contains("stdout", p.buf[0], "rank 1: the moments of parameters [62238720, 124475904)");
    vkg_test_proc_free(&p);
}

/* ---- input that is not a regular file -------------------------------------------------------- */

static void test_non_regular_inputs(void **state)
{
    (void)state;
    char fifo_encoder[CAP + 32];
    snprintf(fifo_encoder, sizeof fifo_encoder, "%s/encoder.json", fifo_vocab_dir);
    const char *const cases[][24] = {
        {"train", "--data", fifo_path, TINY, NULL},
        {"train", "--data", "/dev/zero", TINY, NULL},
        {"train", "--data", folder_path, TINY, NULL},
        {"train", "--data", text_path, "--val-data", fifo_path, "--eval-every", "1", TINY, NULL},
        {"train", "--data", text_path, "--init", fifo_path, NULL},
        {"train", "--data", text_path, "--tokenizer", fifo_path, TINY, NULL},
        {"train", "--data", text_path, "--tokenizer", "gpt2", "--vocab-dir", fifo_vocab_dir, TINY,
         NULL},
        {"prepare", "--out", tmp_root, fifo_path, NULL},
        {"prepare", "--out", tmp_root, "/dev/zero", NULL},
        {"prepare", "--out", tmp_root, "--tokenizer", "gpt2", "--vocab-dir", fifo_vocab_dir,
         text_path, NULL},
    };
    const char *const named[][2] = {
        {fifo_path, "is a FIFO"},
        {"/dev/zero", "is a character device"},
        {folder_path, "is a directory"},
        {fifo_path, "is a FIFO"},
        {fifo_path, "is a FIFO"},
        {fifo_path, "is a FIFO"},
        {fifo_encoder, "is a FIFO"},
        {fifo_path, "is a FIFO"},
        {"/dev/zero", "is a character device"},
        {fifo_encoder, "is a FIFO"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        vkg_test_proc p;
        vkg_test_proc_start(&p, cases[k], &child_opts);
        int rc = vkg_test_proc_wait(&p, 60);
        if (rc != 1)
            fail_msg("case %zu: exit code %d, expected 1", k, rc);
        expect_contains("stderr", p.buf[1], named[k][0]);
        expect_contains("stderr", p.buf[1], named[k][1]);
        vkg_test_proc_free(&p);
        expect_validation_clean();
    }
}

/* ---- text input ------------------------------------------------------------------------------ */

/* The error message of stderr: from the file name to the end of the line. */
static char *message_from(const char *err, const char *name)
{
    const char *at = strstr(err, name);
    if (!at)
        fail_msg("stderr does not name %s:\n%s", name, err);
    return strndup(at, strcspn(at, "\n"));
}

static void test_garbage_refused_alike(void **state)
{
    (void)state;
    char out[CAP + 16];
    snprintf(out, sizeof out, "%s/from_garbage", tmp_root);
    const char *const train[] = {"train", "--data", garbage_path, TINY, NULL};
    const char *const prepare[] = {"prepare", "--out", out, garbage_path, NULL};
    vkg_test_proc p, q;
    vkg_test_proc_start(&p, train, &child_opts);
    assert_int_equal(vkg_test_proc_wait(&p, 60), 1);
    vkg_test_proc_start(&q, prepare, &child_opts);
    assert_int_equal(vkg_test_proc_wait(&q, 60), 1);
    char *a = message_from(p.buf[1], garbage_path), *b = message_from(q.buf[1], garbage_path);
    assert_string_equal(a, b);
    expect_contains("the message", a, "looks binary (a NUL byte at offset 517)");
    assert_int_equal(access(out, F_OK), -1);
    free(a), free(b);
    vkg_test_proc_free(&p), vkg_test_proc_free(&q);
    expect_validation_clean();
}

/* No control character of the crafted vocabulary reaches stderr; ESC shows as \x1b. */
static void test_vocab_escapes_escaped(void **state)
{
    (void)state;
    const char *const train[] = {"train",       "--data",  text_path, "--tokenizer", "gpt2",
                                 "--vocab-dir", vocab_dir, TINY,      NULL};
    const char *const prepare[] = {"prepare",     "--out",   tmp_root,  "--tokenizer", "gpt2",
                                   "--vocab-dir", vocab_dir, text_path, NULL};
    const char *const *cmds[] = {train, prepare};
    for (int k = 0; k < 2; k++) {
        vkg_test_proc p;
        vkg_test_proc_start(&p, cmds[k], &child_opts);
        assert_int_equal(vkg_test_proc_wait(&p, 60), 1);
        expect_contains("stderr", p.buf[1], "encoder.json");
        expect_contains("stderr", p.buf[1], "\\x1b[2J\\x1b]0;owned\\x07");
        for (size_t i = 0; i < p.len[1]; i++) {
            unsigned char c = (unsigned char)p.buf[1][i];
            if ((c < 0x20 && c != '\n') || c == 0x7f)
                fail_msg("stderr holds the control byte 0x%02x at %zu", c, i);
        }
        vkg_test_proc_free(&p);
        expect_validation_clean();
    }
}

/* ---- signals while loading ------------------------------------------------------------------- */

/* 1 once the process catches sig (SigCgt in /proc/PID/status). */
static int catches(pid_t pid, int sig)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    int yes = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "SigCgt:", 7))
            yes = (strtoull(line + 7, NULL, 16) >> (sig - 1)) & 1;
    if (f)
        fclose(f);
    return yes;
}

/* Bytes the process has read with read(2) so far (rchar in /proc/PID/io). */
static unsigned long long chars_read(pid_t pid)
{
    char path[64], line[256];
    unsigned long long n = 0;
    snprintf(path, sizeof path, "/proc/%d/io", (int)pid);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "rchar:", 6))
            n = strtoull(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return n;
}

/* Entries of dir other than the folder's lock file (which holds only the trainer's pid and host,
 * and is left in place: removing it would race with a second trainer's flock). */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "vkgpt.lock");
    if (d)
        closedir(d);
    return n;
}

/* SIGINT is sent as soon as train's handler is in place, before the device, the model and the
 * data are set up; SIGTERM once the process has read the text file whole, while it tokenizes
 * it. Tokenizing 40 MB takes far longer than sending a signal, so each arrives before the data
 * is loaded, and the loader must notice it. */
static void test_signal_while_loading(void **state)
{
    (void)state;
    char big[CAP + 16], ckpt[CAP + 16], msg[CAP + 64];
    const size_t big_bytes = (size_t)40 << 20;
    snprintf(big, sizeof big, "%s/big.txt", tmp_root);
    write_sentences(big, big_bytes);
    const int sigs[] = {SIGINT, SIGTERM};
    for (int k = 0; k < 2; k++) {
        snprintf(ckpt, sizeof ckpt, "%s/ckpt_%d", tmp_root, k);
        const char *const train[] = {"train", "--data", big, TINY, "--ckpt-dir", ckpt, NULL};
        vkg_test_proc p;
        vkg_test_proc_start(&p, train, &child_opts);
        double t0 = vkg_test_now();
        while (!catches(p.pid, sigs[k]) && vkg_test_now() < t0 + 30)
            usleep(500);
        while (k == 1 && chars_read(p.pid) < big_bytes && vkg_test_now() < t0 + 60)
            usleep(500);
        assert_int_equal(kill(p.pid, sigs[k]), 0);
        double sent = vkg_test_now();
        int rc = vkg_test_proc_wait(&p, 60);
        printf("exit %d, %.2f s after the signal\n", rc, vkg_test_now() - sent);
        assert_int_equal(rc, sigs[k] == SIGINT ? 128 + SIGINT : 75); /* 75: a preemption */
        snprintf(msg, sizeof msg, "interrupted while loading %s", big);
        expect_contains("stderr", p.buf[1], msg);
        expect_contains("stderr", p.buf[1], "nothing was saved");
        assert_null(strstr(p.buf[0], "step ")); /* no training step */
        assert_int_equal(count_entries(ckpt), 0);
        vkg_test_proc_free(&p);
        expect_validation_clean();
    }
    unlink(big);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_values_and_conflicts),
        cmocka_unit_test(test_good_values),
        cmocka_unit_test(test_non_regular_inputs),
        cmocka_unit_test(test_garbage_refused_alike),
        cmocka_unit_test(test_vocab_escapes_escaped),
        cmocka_unit_test(test_signal_while_loading),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
