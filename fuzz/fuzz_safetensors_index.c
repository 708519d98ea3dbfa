/* Fuzz target: a sharded model's index, model.safetensors.index.json (src/io/safetensors_index.c),
 * parsed from memory. An accepted index lists each tensor once, sorted, each found by lookup, and
 * names only plain shard files (non-empty, no '/', '\\', ':' or ".."): none can lead a caller out
 * of the index's folder. */
#include <string.h>

#include "fuzz_util.h"
#include "io/io_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vkg_st_index idx;
    vkg_status st = vkg__safetensors_index_parse((const char *)data, size,
                                                 "model.safetensors.index.json", &idx);
    if (st != VKG_OK) {
        FUZZ_REQUIRE(idx.count == 0 && idx.entries == NULL && vkg_error_message()[0] != '\0');
        return 0;
    }
    for (int i = 0; i < idx.count; i++) {
        const vkg_st_index_entry *e = &idx.entries[i];
        FUZZ_REQUIRE(e->name && e->file && e->file[0] != '\0');
        FUZZ_REQUIRE(!strpbrk(e->file, "/\\:") && !strstr(e->file, ".."));
        FUZZ_REQUIRE(i == 0 || strcmp(idx.entries[i - 1].name, e->name) < 0);
        FUZZ_REQUIRE(vkg_safetensors_index_lookup(&idx, e->name) == e->file);
    }
    vkg_safetensors_index_deinit(&idx);
    return 0;
}
