/* finetune_gpt2: fine-tune a GPT-2 model (an llm.c model file) on your own text, from C through
 * vkgpt's public API: the GPT-2 tokenizer (vkgpt/tokenizer.h), llm.c token shards written
 * crash-safely (vkg_shard_write, vkgpt/io.h) and the trainer (vkgpt/train.h). Plain C11 and CMake:
 * the same on every platform vkgpt builds on.
 *
 *   finetune_gpt2 [-v VOCAB_DIR] [-m MODEL] [-o OUT] [-s STEPS] [-B N] [-T N] [-l LR]
 *                 [-p PROMPT] [TEXT_FILE]
 *
 * 1. prepare   tokenizes TEXT_FILE with GPT-2's BPE (VOCAB_DIR/vocab.bpe + encoder.json) into
 *              llm.c token shards OUT/data/train_000000.bin and val_000000.bin (the last fifth of
 *              the tokens) and the llm.c tokenizer file OUT/data/tokenizer.bin
 * 2. base      the llm.c model file to start from: -m MODEL (for example llm.c's gpt2_124M.bin;
 *              this program downloads nothing). Without -m it trains a small GPT-2-vocabulary
 *              model for STEPS steps as a stand-in and takes its checkpoint's model.bin, an llm.c
 *              file like any other.
 * 3. fine-tune a trainer with init_path = MODEL on the shards, evaluating on the validation shard
 *              when it holds more than one batch, checkpoints in OUT/finetune
 * 4. sample    continues PROMPT with the fine-tuned model
 *
 * Defaults: VOCAB_DIR data/gpt2 (run from the source tree, or pass it), OUT finetune_out, STEPS
 * 30, B 4, T 64, LR 3e-4, PROMPT "The keeper". Without TEXT_FILE a short built-in text is written
 * to OUT/text.txt and used. With the defaults and no -m it takes well under a minute on a CPU
 * through lavapipe; a real gpt2_124M.bin wants a GPU. The device is the first suitable one, or
 * the one VKGPT_DEVICE names. Exit code 0 on success, 1 when something fails (the message says
 * what), 2 for wrong arguments.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vkgpt/io.h"
#include "vkgpt/tokenizer.h"
#include "vkgpt/train.h"

typedef struct opts {
    const char *vocab, *model, *out, *prompt, *text;
    int steps, batch, seq;
    float lr;
} opts;

static const char *const story[] = {
    "The keeper liked the mornings best. The sea was quiet then, and the gulls had not yet begun "
    "their quarrels. He wrote the weather in his book: wind from the west, light; sky clear; sea "
    "calm. Then he made his tea and sat by the window to drink it, watching the light change on "
    "the water.",
    "In the afternoon the keeper walked to the village for bread and news. The baker told him "
    "that a storm was coming from the south. The fishermen said the same. The keeper thanked them "
    "and walked home along the cliffs, watching the clouds build over the far hills.",
    "The storm came in the night. The wind shook the tower and the rain beat against the glass. "
    "The keeper did not sleep. He kept the lamp bright and the lens turning, and every hour he "
    "wrote the weather in his book: wind from the south, strong; rain; sea rough. Far out in the "
    "dark a ship was looking for the harbour, and the keeper's light showed it the way between "
    "the rocks.",
    "In the morning the sea was grey and tired, and the ship lay safe at anchor in the bay. The "
    "captain rowed ashore and climbed the hill to thank the keeper. They drank tea together by "
    "the window and watched the gulls come back to the harbour. The keeper wrote in his book: "
    "wind from the west, light; sky clearing; sea going down. Then he climbed the stair, trimmed "
    "the wick, and wiped the salt from the great glass lens, as he had done for thirty years.",
};

static int usage(void)
{
    fprintf(stderr, "usage: finetune_gpt2 [-v VOCAB_DIR] [-m MODEL] [-o OUT] [-s STEPS] [-B N] "
                    "[-T N] [-l LR] [-p PROMPT] [TEXT_FILE]\n");
    return 2;
}

/* A whole number in [1, 1000000] into *v; 0 when s is not one. */
static int whole(const char *s, int *v)
{
    char *end;
    long x = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || x < 1 || x > 1000000)
        return 0;
    *v = (int)x;
    return 1;
}

static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){"data/gpt2", NULL, "finetune_out", "The keeper", NULL, 30, 4, 64, 3e-4f};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == '\0') {
            if (o->text)
                return 0;
            o->text = a;
            continue;
        }
        if (a[2] != '\0' || i + 1 >= argc)
            return 0;
        const char *v = argv[++i];
        switch (a[1]) {
        case 'v':
            o->vocab = v;
            break;
        case 'm':
            o->model = v;
            break;
        case 'o':
            o->out = v;
            break;
        case 'p':
            o->prompt = v;
            break;
        case 's':
            if (!whole(v, &o->steps))
                return 0;
            break;
        case 'B':
            if (!whole(v, &o->batch))
                return 0;
            break;
        case 'T':
            if (!whole(v, &o->seq))
                return 0;
            break;
        case 'l':
            o->lr = strtof(v, NULL);
            if (!(o->lr > 0.0f))
                return 0;
            break;
        default:
            return 0;
        }
    }
    return 1;
}

static int report(const char *what, vkg_status st)
{
    fprintf(stderr, "finetune_gpt2: %s failed: %s: %s\n", what, vkg_status_str(st),
            vkg_error_message());
    return 1;
}

/* The whole of the file at path, NUL-terminated, into *text (free it); 0 on failure (said). */
static int read_text(const char *path, char **text, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 0;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *grown = realloc(buf, 2 * cap + 1);
        if (!grown)
            free(buf);
        buf = grown, cap *= 2;
    }
    int ok = buf && !ferror(f);
    fclose(f);
    if (!ok) {
        fprintf(stderr, "finetune_gpt2: could not read %s\n", path);
        free(buf);
        return 0;
    }
    buf[n] = '\0';
    *text = buf, *len = n;
    return 1;
}

static int write_story(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return 0;
    }
    for (size_t i = 0; i < sizeof story / sizeof story[0]; i++)
        fprintf(f, "%s\n\n", story[i]);
    return fclose(f) == 0;
}

/* Step 1: the shards and the tokenizer file under OUT/data; *ntrain and *nval tokens. */
static int prepare(const opts *o, const char *text_path, size_t *ntrain, size_t *nval)
{
    char path[1024];
    char *text = NULL;
    size_t len = 0;
    vkg_tokenizer_t *tok = NULL;
    vkg_tokens ids = {0};
    vkg_status st = vkg_tokenizer_create_gpt2(o->vocab, &tok);
    if (st != VKG_OK)
        return !report("loading the GPT-2 vocabulary", st);
    int ok = read_text(text_path, &text, &len);
    /* a document starts with end-of-text, as llm.c's shards do */
    if (ok && ((st = vkg_tokens_push(&ids, vkg_tokenizer_eot(tok))) != VKG_OK ||
               (st = vkg_tokenizer_encode(tok, text, len, &ids)) != VKG_OK))
        ok = !report("tokenizing the text", st);
    size_t nv = ids.n / 5, nt = ids.n - nv;
    snprintf(path, sizeof path, "%s/data", o->out);
    if (ok && (st = vkg_io_make_dirs(path)) != VKG_OK)
        ok = !report("creating the data folder", st);
    /* llm.c's shards hold uint16 tokens (GPT-2's 50257 fit); vkg_shard_write writes one
     * crash-safely, header included */
    uint16_t *u16 = ok ? malloc((ids.n ? ids.n : 1) * sizeof *u16) : NULL;
    if (ok && !u16)
        ok = !report("converting the tokens", VKG_ERR_NOMEM);
    for (size_t i = 0; ok && i < ids.n; i++)
        u16[i] = (uint16_t)ids.ids[i];
    const char *names[2] = {"train", "val"};
    size_t first[2] = {0, nt}, count[2] = {nt, nv};
    for (int i = 0; i < 2 && ok; i++) {
        snprintf(path, sizeof path, "%s/data/%s_000000.bin", o->out, names[i]);
        if ((st = vkg_shard_write(path, u16 + first[i], count[i])) != VKG_OK)
            ok = !report("writing a token shard", st);
    }
    free(u16);
    snprintf(path, sizeof path, "%s/data/tokenizer.bin", o->out);
    if (ok && (st = vkg_tokenizer_save(tok, path)) != VKG_OK)
        ok = !report("writing the tokenizer file", st);
    if (ok)
        printf("%zu tokens: %zu for training, %zu for validation, in %s/data\n", ids.n, nt, nv,
               o->out);
    *ntrain = nt, *nval = nv;
    vkg_tokens_deinit(&ids);
    vkg_tokenizer_destroy(&tok);
    free(text);
    return ok;
}

/* Train with cfg to the end, printing every tenth step, and write the checkpoint of the last
 * step (its folder into ckpt, cap bytes); then, when prompt is not NULL, sample. Returns 1 on
 * success. */
static int train(const vkg_train_config *cfg, const char *what, const char *prompt, char *ckpt,
                 size_t cap)
{
    vkg_trainer_t *t = NULL;
    vkg_status st = vkg_trainer_create(cfg, &t);
    if (st != VKG_OK)
        return !report(what, st);
    while (!vkg_trainer_done(t)) {
        vkg_step_info s;
        if ((st = vkg_trainer_step(t, &s)) != VKG_OK) {
            vkg_trainer_destroy(&t);
            return !report(what, st);
        }
        if (s.step == 1 || s.step % 10 == 0 || s.has_eval)
            printf("step %4lld  loss %.4f%s", s.step, (double)s.loss, s.has_eval ? "" : "\n");
        if (s.has_eval)
            printf("  validation loss %.4f\n", (double)s.eval_loss);
    }
    if ((st = vkg_trainer_checkpoint(t, ckpt, cap)) != VKG_OK) {
        vkg_trainer_destroy(&t);
        return !report("writing the checkpoint", st);
    }
    if (prompt) {
        char *sample = NULL;
        if ((st = vkg_trainer_sample(t, prompt, 40, 0.8f, 40, 1, &sample)) != VKG_OK) {
            vkg_trainer_destroy(&t);
            return !report("sampling", st);
        }
        printf("== 4. sample from the fine-tuned model\n--- sample ---\n%s\n--------------\n",
               sample);
        free(sample);
    }
    vkg_trainer_destroy(&t);
    return 1;
}

int main(int argc, char **argv)
{
    opts o;
    if (!parse(argc, argv, &o))
        return usage();
    char text_path[1024], data[1024], val[1024], base_dir[1024], base_model[1024], ft_dir[1024];
    snprintf(text_path, sizeof text_path, "%s/text.txt", o.out);
    if (!o.text) {
        vkg_status st = vkg_io_make_dirs(o.out);
        if (st != VKG_OK)
            return report("creating the output folder", st);
        if (!write_story(text_path))
            return 1;
    }
    const char *text = o.text ? o.text : text_path;

    printf("== 1. prepare: GPT-2 tokens from %s\n", text);
    size_t ntrain = 0, nval = 0;
    if (!prepare(&o, text, &ntrain, &nval))
        return 1;
    snprintf(data, sizeof data, "%s/data/train_*.bin", o.out);
    snprintf(val, sizeof val, "%s/data/val_*.bin", o.out);

    vkg_train_config cfg = vkg_train_config_default();
    cfg.device = getenv("VKGPT_DEVICE");
    cfg.data = data;
    cfg.tokenizer = "gpt2", cfg.vocab_dir = o.vocab; /* to encode the prompt */
    cfg.batch = o.batch, cfg.seq = o.seq, cfg.steps = o.steps;
    cfg.warmup = 2;
    const char *model = o.model;
    if (model) {
        printf("== 2. base model: %s\n", model);
    } else {
        printf("== 2. base model: training a small stand-in GPT-2 (%d steps; pass -m for a real "
               "one)\n",
               o.steps);
        vkg_train_config base = cfg;
        base.layers = 2, base.heads = 4, base.channels = 64, base.max_seq_len = o.seq;
        base.lr = 3e-3f;
        snprintf(base_dir, sizeof base_dir, "%s/base", o.out);
        base.ckpt_dir = base_dir;
        char ckpt[1024];
        if (!train(&base, "training the stand-in base model", NULL, ckpt, sizeof ckpt))
            return 1;
        snprintf(base_model, sizeof base_model, "%.1000s/model.bin", ckpt);
        model = base_model;
    }

    /* Evaluate on the validation shard only when it holds more than one batch. */
    cfg.init_path = model;
    cfg.lr = o.lr;
    if (nval > (size_t)o.batch * (size_t)o.seq) {
        cfg.val_data = val;
        cfg.eval_every = (o.steps + 1) / 2, cfg.eval_batches = 2;
    } else {
        printf("(the validation shard is shorter than one batch: no evaluation)\n");
    }
    snprintf(ft_dir, sizeof ft_dir, "%s/finetune", o.out);
    cfg.ckpt_dir = ft_dir;
    printf("== 3. fine-tune: %d steps from %s\n", o.steps, model);
    char ckpt[1024];
    if (!train(&cfg, "fine-tuning", o.prompt, ckpt, sizeof ckpt))
        return 1;
    printf("done: fine-tuned model in %s/model.bin (%zu training tokens)\n", ckpt, ntrain);
    return 0;
}
