/* Fuzz target: safetensors files (src/io/safetensors.c), read from memory. An accepted file's
 * tensors must tile the bytes after the header exactly, in data order, each findable by name and
 * readable (raw, and as fp32 where the dtype converts) into buffers of exactly its size (ASan
 * catches a read or write past them); its metadata must be findable by key. Nothing is allocated
 * beyond what the input's size allows (libFuzzer's -malloc_limit_mb catches that). */
#include <string.h>

#include "fuzz_util.h"
#include "io/io_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vkg_safetensors *s = NULL;
    vkg_status st = vkg__safetensors_open_mem(data, size, "model.safetensors", &s);
    if (st != VKG_OK) {
        FUZZ_REQUIRE(s == NULL && vkg_error_message()[0] != '\0');
        return 0;
    }
    uint64_t n = 0;
    for (int b = 7; b >= 0; b--)
        n = n << 8 | data[b];
    FUZZ_REQUIRE(n <= VKG_ST_MAX_HEADER && 8 + n <= size);
    uint64_t at = 8 + n;
    const uint16_t one = 1;
    int little_endian = *(const unsigned char *)&one == 1; /* raw reads are in host order */
    for (int i = 0; i < vkg_safetensors_count(s); i++) {
        const vkg_st_info *t = vkg_safetensors_info(s, i);
        size_t es = vkg_st_dtype_size(t->dtype);
        FUZZ_REQUIRE(es > 0 && t->rank >= 0 && t->rank <= VKG_ST_MAX_RANK);
        FUZZ_REQUIRE(t->offset == at && t->nbytes == t->numel * es && t->nbytes <= size - at);
        FUZZ_REQUIRE(vkg_safetensors_find(s, t->name) == t);
        at += t->nbytes;
        unsigned char *raw = malloc(t->nbytes ? t->nbytes : 1);
        FUZZ_REQUIRE(raw);
        FUZZ_REQUIRE(vkg_safetensors_read_raw(s, t->name, raw, t->nbytes) == VKG_OK);
        FUZZ_REQUIRE(!little_endian || memcmp(raw, data + t->offset, t->nbytes) == 0);
        free(raw);
        if (t->dtype == VKG_ST_F32 || t->dtype == VKG_ST_BF16 || t->dtype == VKG_ST_F16) {
            float *f = malloc(t->numel ? t->numel * sizeof *f : 1);
            FUZZ_REQUIRE(f);
            FUZZ_REQUIRE(vkg_safetensors_read_f32(s, t->name, f, t->numel) == VKG_OK);
            volatile float sum = 0.0f; /* touch every value: all must have been written */
            for (uint64_t e = 0; e < t->numel; e++)
                sum += f[e];
            (void)sum;
            free(f);
        }
    }
    FUZZ_REQUIRE(at == size);
    for (int i = 0; i < vkg_safetensors_metadata_count(s); i++) {
        const char *k = NULL, *v = NULL;
        vkg_safetensors_metadata_at(s, i, &k, &v);
        FUZZ_REQUIRE(k && v && vkg_safetensors_metadata(s, k) == v);
    }
    vkg_safetensors_close(&s);
    FUZZ_REQUIRE(s == NULL);
    return 0;
}
