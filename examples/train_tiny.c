/* train_tiny: train a tiny GPT-2 from C through vkgpt's public trainer API (vkgpt/train.h).
 *
 *   train_tiny [TEXT_FILE]
 *
 * Without an argument it writes a small built-in text to train_tiny.txt in the current folder and
 * trains on that. It prints the loss as it goes down, then a sample from the trained model, and
 * the first and final losses on their own lines ("first loss 5.61", "final loss 2.43").
 * The device is the first suitable Vulkan device, or the one VKGPT_DEVICE names (an index or a
 * part of its name), exactly as for `vkgpt train`. About 10 seconds on a CPU through lavapipe.
 * Exit code 0 on success, 1 when something fails (the message says what).
 */
#include <stdio.h>
#include <stdlib.h>

#include "vkgpt/train.h"

/* A few lines of text to learn from: short and repetitive, so a tiny model learns it quickly. */
static const char *const lines[] = {
    "The little engine climbed the hill, and the hill was long.",
    "The little engine said: I think I can, I think I can.",
    "The big engine did not stop, and the little engine did not stop.",
    "At the top of the hill the little engine saw the town below.",
    "The children in the town were glad, and the engine was glad too.",
};

static int write_text(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return 0;
    }
    for (int rep = 0; rep < 40; rep++)
        for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
            fprintf(f, "%s\n", lines[(i + (size_t)rep) % (sizeof lines / sizeof lines[0])]);
    return fclose(f) == 0;
}

/* Print what went wrong: vkgpt functions return a status and record a message. */
static int report(const char *what, vkg_status st)
{
    fprintf(stderr, "train_tiny: %s failed: %s: %s\n", what, vkg_status_str(st),
            vkg_error_message());
    return 1;
}

int main(int argc, char **argv)
{
    const char *text = argc > 1 ? argv[1] : "train_tiny.txt";
    if (argc > 2) {
        fprintf(stderr, "usage: train_tiny [TEXT_FILE]\n");
        return 2;
    }
    if (argc == 1 && !write_text(text))
        return 1;

    /* 1. Describe the run. Start from the defaults and change what matters; every string must
     *    stay valid until vkg_trainer_create returns. */
    vkg_train_config cfg = vkg_train_config_default();
    cfg.device = getenv("VKGPT_DEVICE"); /* NULL: the first suitable device */
    cfg.data = text;                     /* a text file: byte-level tokens (V = 256 + 1) */
    cfg.layers = 2, cfg.heads = 4, cfg.channels = 64, cfg.max_seq_len = 32;
    cfg.batch = 8, cfg.seq = 32; /* 8 x 32 tokens per step */
    cfg.steps = 80;
    cfg.lr = 3e-3f, cfg.warmup = 5; /* cosine decay to lr x 0.1 after 5 warmup steps */
    cfg.shuffle = 1;
    cfg.seed = 42;

    /* 2. Create the trainer: it opens the device, builds the model and reads the data. */
    vkg_trainer_t *t = NULL;
    vkg_status st = vkg_trainer_create(&cfg, &t);
    if (st != VKG_OK)
        return report("creating the trainer", st);
    vkg_trainer_info info;
    vkg_trainer_get_info(t, &info);
    printf("device %s; model %zu parameters; %d x %d tokens per step\n", info.device,
           info.num_params, info.batch, info.seq);

    /* 3. Train: one call per optimizer step. The trainer never prints; vkg_step_info says how the
     *    step went. */
    float first = 0.0f, last = 0.0f;
    while (!vkg_trainer_done(t)) {
        vkg_step_info s;
        if ((st = vkg_trainer_step(t, &s)) != VKG_OK) {
            vkg_trainer_destroy(&t);
            return report("a training step", st);
        }
        if (s.step == 1)
            first = s.loss;
        last = s.loss;
        if (s.step == 1 || s.step % 10 == 0)
            printf("step %3lld  loss %.4f  lr %.2e  %.0f tokens/s\n", s.step, (double)s.loss,
                   (double)s.lr, s.tokens_per_s);
    }

    /* 4. Sample: 120 tokens after a prompt, temperature 0.8, among the 20 likeliest tokens. */
    char *sample = NULL;
    st = vkg_trainer_sample(t, "The little", 120, 0.8f, 20, 7, &sample);
    if (st != VKG_OK) {
        vkg_trainer_destroy(&t);
        return report("sampling", st);
    }
    printf("--- sample ---\n%s\n--------------\n", sample);
    free(sample);
    vkg_trainer_destroy(&t);

    printf("first loss %.4f\nfinal loss %.4f\n", (double)first, (double)last);
    return 0;
}
