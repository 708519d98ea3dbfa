/* Text generation from a model on the device: encode the prompt, then repeatedly run the forward
 * pass over the last T tokens and sample the next one on the host. Used for samples during
 * training and by `vkgpt sample`. One forward per generated token (no key/value cache). */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "train/trainer_internal.h"

vkg_status vkg__generate(vkg_strategy *par, const vkg_model_config *cfg, int B, int T,
                         const vkg_tokenizer_t *tok, const char *prompt, int len, float temperature,
                         int top_k, vkg_rng *rng, const volatile sig_atomic_t *stop, char **text)
{
    VKG_CHECK(tok, VKG_ERR_STATE, "no tokenizer: give --tokenizer to decode samples");
    VKG_CHECK(len >= 0, VKG_ERR_INVALID_ARG, "sample length must be >= 0, got %d", len);
    VKG_CHECK(vkg_tokenizer_vocab_size(tok) <= cfg->vocab_size, VKG_ERR_MISMATCH,
              "the tokenizer has %d tokens but the model only %d", vkg_tokenizer_vocab_size(tok),
              cfg->vocab_size);
    vkg_status st = VKG_OK;
    vkg_tokens toks = {0};
    int32_t *inputs = NULL;
    float *row = NULL;
    int eot = vkg_tokenizer_eot(tok);
    if (prompt && *prompt) {
        VKG_TRY_GOTO(st, vkg_tokenizer_encode(tok, prompt, strlen(prompt), &toks), done);
    } else {
        VKG_TRY_GOTO(st, vkg_tokens_push(&toks, eot >= 0 ? eot : 0), done);
    }
    size_t skip = prompt && *prompt ? 0 : toks.n; /* do not print a leading end-of-text */
    inputs = malloc((size_t)B * (size_t)T * sizeof *inputs);
    row = malloc((size_t)cfg->padded_vocab_size * sizeof *row);
    VKG_CHECK_GOTO(st, inputs && row, VKG_ERR_NOMEM, done, "no memory for sampling");
    for (int i = 0; i < len && !(stop && *stop); i++) {
        size_t ctx = toks.n < (size_t)T ? toks.n : (size_t)T;
        const int32_t *last = toks.ids + (toks.n - ctx);
        for (size_t j = 0; j < (size_t)B * (size_t)T; j++)
            inputs[j] = eot >= 0 ? eot : 0;
        memcpy(inputs, last, ctx * sizeof *inputs);
        VKG_TRY_GOTO(st, vkg_strategy_logits(par, inputs, 0, (int)ctx - 1, row), done);
        int next = vkg_sample_token(row, vkg_tokenizer_vocab_size(tok), temperature, top_k, rng);
        VKG_TRY_GOTO(st, vkg_tokens_push(&toks, next), done);
    }
    size_t n = 0;
    VKG_TRY_GOTO(st, vkg_tokenizer_decode(tok, toks.ids + skip, toks.n - skip, text, &n), done);
done:
    free(inputs);
    free(row);
    vkg_tokens_deinit(&toks);
    return st;
}
