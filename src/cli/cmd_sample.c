/* `vkgpt sample`: load a model (a checkpoint folder, one checkpoint, or an llm.c model file) and
 * print generated text, with the same generation code training uses for its samples; and how
 * every sample reaches stdout (control bytes escaped on a terminal, raw elsewhere). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/file.h"
#include "os/glob.h"
#include "os/proc.h"
#include "base/error.h"
#include "base/escape.h"
#include "cli/cli.h"
#include "cli/flags.h"
#include "cli/internal.h"
#include "vkgpt/io.h"
#include "vkgpt/train.h"

static int exists(const char *path, int want_dir)
{
    return want_dir ? vkg_os_is_dir(path) : vkg_os_is_file(path);
}

#define PATH_CAP 1400

/* The folder of the file path names (POSIX dirname, in place, for a file's path: "." for a bare
 * name, "/" for one in the root; '\\' separates too on Windows: vkg_os_is_path_sep). */
static char *parent_dir(char *path)
{
    char *cut = NULL;
    for (char *p = path; *p; p++)
        if (vkg_os_is_path_sep((unsigned char)*p))
            cut = p;
    if (!cut)
        return strcpy(path, ".");
    cut[cut == path] = '\0';
    return path;
}

/* dst = a + b, or an error naming the path when it does not fit. */
static vkg_status join(char *dst, const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    VKG_CHECK(la + lb < PATH_CAP, VKG_ERR_INVALID_ARG, "path too long: %s%s", a, b);
    memcpy(dst, a, la);
    memcpy(dst + la, b, lb + 1);
    return VKG_OK;
}

/* Say which newer checkpoints of folder dir, marked complete (DONE), were passed over because
 * they do not pass the completeness checks (sampling reads the newest one that does). */
static void warn_passed_over(const char *dir, unsigned long long chosen)
{
    vkg_os_paths names = {0};
    if (vkg_os_list_dir(dir, &names) != 0)
        return;
    for (size_t i = 0; i < names.n; i++) {
        unsigned long long step;
        char rest[2], done[PATH_CAP];
        if (sscanf(names.v[i], "step_%llu%1s", &step, rest) != 1 || step <= chosen ||
            (size_t)snprintf(done, sizeof done, "%s/%s/DONE", dir, names.v[i]) >= sizeof done ||
            !exists(done, 0))
            continue;
        fprintf(stderr,
                "vkgpt sample: warning: %s/%s is marked complete but does not load (damaged or "
                "foreign; `vkgpt train --resume` names the problem); sampling from step %llu\n",
                dir, names.v[i], chosen);
    }
    vkg_os_paths_free(&names);
}

/* model: the model to load, a model file or a folder holding one (a checkpoint's: model.bin, or
 * config.json + model.safetensors); tok: a tokenizer file found beside it, or "" */
static vkg_status resolve(const char *ckpt, char *model, char *tok)
{
    char latest[1024], buf[PATH_CAP], dir[PATH_CAP];
    vkg_model_config cfg;
    tok[0] = '\0';
    if (exists(ckpt, 0)) {
        VKG_TRY(join(model, ckpt, ""));
    } else if (exists(ckpt, 1)) {
        uint64_t step;
        if (vkg_checkpoint_find_latest(ckpt, latest, sizeof latest, &step) == VKG_OK) {
            VKG_TRY(join(model, latest, ""));
            warn_passed_over(ckpt, (unsigned long long)step);
        } else if (vkg_checkpoint_read_model(ckpt, &cfg, NULL) != VKG_ERR_NOT_FOUND) {
            VKG_TRY(join(model, ckpt, "")); /* one checkpoint, or a model saved alone */
        } else {
            return VKG_FAIL(VKG_ERR_NOT_FOUND,
                            "%s holds no complete checkpoint and no model (model.bin, or "
                            "config.json + model.safetensors)",
                            ckpt);
        }
    } else {
        VKG_CHECK(vkg_os_exists(ckpt) != 1, VKG_ERR_IO,
                  "%s is neither a regular file nor a folder (a FIFO or device cannot be read as "
                  "a model)",
                  ckpt);
        return VKG_FAIL(VKG_ERR_NOT_FOUND, "%s: no such file or folder", ckpt);
    }
    /* tokenizer.bin beside the model, or in the checkpoint folder above it */
    VKG_TRY(join(buf, model, ""));
    VKG_TRY(join(dir, exists(model, 1) ? model : parent_dir(buf), ""));
    VKG_TRY(join(buf, dir, "/tokenizer.bin"));
    if (exists(buf, 0))
        return join(tok, buf, "");
    VKG_TRY(join(buf, dir, "/../tokenizer.bin"));
    if (exists(buf, 0))
        return join(tok, buf, "");
    return VKG_OK;
}

void vkg_cli_print_sample(const char *text, int raw)
{
    size_t n = strlen(text);
    int escape = !raw && vkg_os_isatty(1);
    char *shown = escape ? malloc(4 * n + 1) : NULL;
    if (escape && !shown) { /* never raw on a terminal */
        printf("(sample not shown: no memory to escape its control bytes)\n");
        return;
    }
    if (shown)
        vkg__escape_text(shown, text, n);
    printf("%s\n", shown ? shown : text);
    free(shown);
}

int vkg_cli_sample(int argc, char **argv)
{
    const char *ckpt = NULL, *prompt = "", *tokenizer = NULL, *vocab_dir = NULL;
    const char *device = getenv("VKGPT_DEVICE");
    int len = 200, top_k = 40, raw = 0;
    float temperature = 0.8f;
    uint64_t seed = 42;
    const vkg_flag flags[] = {
        {"--ckpt", VKG_FLAG_STR, &ckpt, "checkpoint folder, one checkpoint, or an llm.c model file",
         0, 0, 0},
        {"--prompt", VKG_FLAG_STR, &prompt, "text to continue (default: a new document)", 0, 0, 0},
        {"--len", VKG_FLAG_INT, &len, "tokens to generate", 0, 0, 1e6},
        {"--temperature", VKG_FLAG_FLOAT, &temperature, "sampling temperature (0: greedy)", 0, 0,
         100},
        {"--top-k", VKG_FLAG_INT, &top_k, "sample among the k likeliest tokens (0: all)", 0, 0,
         1 << 24},
        {"--seed", VKG_FLAG_U64, &seed, "sampling seed", 0, 0, 0},
        {"--tokenizer", VKG_FLAG_STR, &tokenizer,
         "byte, gpt2, an llm.c tokenizer file, or a Hugging Face tokenizer (a folder with "
         "tokenizer.json, or the file)",
         0, 0, 0},
        {"--vocab-dir", VKG_FLAG_STR, &vocab_dir,
         "vocab.bpe + encoder.json folder: GPT-2 prompts (implies --tokenizer gpt2)", 0, 0, 0},
        {"--device", VKG_FLAG_STR, &device, "device index or name", 0, 0, 0},
        {"--raw", VKG_FLAG_BOOL, &raw,
         "write the text's bytes as they are on a terminal too (by default control bytes are "
         "shown as \\xNN there; a pipe or file always gets them raw)",
         0, 0, 0},
    };
    int rc = vkg_flags_parse("sample", "--ckpt DIR|FILE [options]", flags,
                             (int)(sizeof flags / sizeof flags[0]), argc, argv, NULL, NULL);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (!ckpt) {
        fprintf(stderr, "vkgpt sample: --ckpt is required\n");
        return 2;
    }
    if (vocab_dir && tokenizer && strcmp(tokenizer, "gpt2")) {
        fprintf(stderr,
                "vkgpt sample: --vocab-dir conflicts with --tokenizer %s (it is read only "
                "by the gpt2 tokenizer)\n",
                tokenizer);
        return 2;
    }
    char model[PATH_CAP], tok[PATH_CAP];
    vkg_status st = resolve(ckpt, model, tok);
    if (st != VKG_OK)
        return vkg_cli_report("sample", st);
    vkg_model_config mcfg;
    int version;
    st = exists(model, 1) ? vkg_checkpoint_read_model(model, &mcfg, NULL)
                          : vkg_modelfile_read_header(model, &mcfg, &version);
    if (st != VKG_OK)
        return vkg_cli_report("sample", st);
    vkg_train_config c = vkg_train_config_default();
    c.device = device;
    c.init_path = model;
    /* A checkpoint's tokenizer.bin only decodes: encoding a GPT-2 prompt needs the BPE files. */
    c.tokenizer = tokenizer ? tokenizer : vocab_dir ? "gpt2" : (tok[0] ? tok : NULL);
    c.vocab_dir = vocab_dir;
    c.batch = 1;
    /* The context only needs the prompt and the generated tokens (a prompt never has more tokens
     * than bytes): a shorter model shape makes each per-token forward pass cheaper. */
    size_t need = strlen(prompt) + (size_t)len + 1;
    c.seq = need < (size_t)mcfg.max_seq_len ? (int)need : mcfg.max_seq_len;
    c.steps = 0;
    vkg_trainer_t *t = NULL;
    int tell = vkg_os_isatty(2); /* what takes a while is said on a terminal, not in pipes */
    if (tell)
        fprintf(stderr, "loading %s onto the device...\n", model);
    if ((st = vkg_trainer_create(&c, &t)) != VKG_OK)
        return vkg_cli_report("sample", st);
    if (tell)
        fprintf(stderr, "sampling %d tokens...\n", len);
    char *text = NULL;
    st = vkg_trainer_sample(t, prompt, len, temperature, top_k, seed, &text);
    if (st == VKG_OK)
        vkg_cli_print_sample(text, raw);
    free(text);
    vkg_trainer_destroy(&t);
    if (st == VKG_ERR_UNSUPPORTED && prompt[0] && !vocab_dir) {
        vkg_cli_report("sample", st);
        fprintf(stderr, "vkgpt sample: to encode a GPT-2 prompt, pass --vocab-dir DIR (the folder "
                        "of vocab.bpe and encoder.json)\n");
        return 2;
    }
    return st == VKG_OK ? 0 : vkg_cli_report("sample", st);
}
