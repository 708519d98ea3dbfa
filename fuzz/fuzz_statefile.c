/* Fuzz target: vkgpt state files (src/train/statefile.c), read from memory twice: header only, and
 * whole with the CRC-32 check. An accepted file has a valid model configuration whose true
 * parameter count (computed here without overflow) is the one the reader reports, and exactly
 * the size 1024 + 8n + 4. */
#include "fuzz_util.h"
#include "io/io_internal.h"
#include "train/checkpoint.h"

/* The parameter count of cfg in 128-bit arithmetic: no wrap-around whatever the header says. */
__extension__ typedef unsigned __int128 u128;

static u128 exact_params(const vkg_model_config *c)
{
    u128 Vp = (unsigned)c->padded_vocab_size, C = (unsigned)c->channels;
    u128 T = (unsigned)c->max_seq_len, L = (unsigned)c->num_layers;
    return Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
}

static void check(const uint8_t *data, size_t size, int whole)
{
    FILE *f = fuzz_stream(data, size);
    vkg_model_config cfg;
    vkg_checkpoint_state st;
    size_t n = 0;
    float *m = NULL, *v = NULL;
    vkg_status s = vkg__statefile_read_stream(f, "state.bin", size, &cfg, &st, &n,
                                              whole ? &m : NULL, whole ? &v : NULL);
    fclose(f);
    if (s != VKG_OK) {
        FUZZ_REQUIRE(m == NULL && v == NULL && vkg_error_message()[0] != '\0');
        return;
    }
    FUZZ_REQUIRE(vkg_model_config_validate(&cfg) == VKG_OK);
    FUZZ_REQUIRE(exact_params(&cfg) == n);
    FUZZ_REQUIRE(size == VKG_FILE_HEADER_BYTES + 8 * (uint64_t)n + 4);
    if (whole) {
        volatile float sum = 0.0f;
        for (size_t i = 0; i < n; i++)
            sum += m[i] + v[i];
        (void)sum;
    }
    free(m);
    free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check(data, size, 0);
    check(data, size, 1);
    return 0;
}
