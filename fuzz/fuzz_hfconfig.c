/* Fuzz target: Hugging Face's config.json (src/io/hfconfig.c), parsed from memory. An accepted
 * file gives a valid configuration whose parameter table is computed; a refusal leaves the
 * output untouched and says why. */
#include <string.h>

#include "fuzz_util.h"
#include "vkgpt/io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vkg_model_config cfg, before;
    memset(&cfg, 0x5a, sizeof cfg);
    before = cfg;
    vkg_status st = vkg_hf_config_parse((const char *)data, size, "config.json", &cfg);
    if (st != VKG_OK) {
        FUZZ_REQUIRE(!memcmp(&cfg, &before, sizeof cfg) && vkg_error_message()[0] != '\0');
        return 0;
    }
    FUZZ_REQUIRE(vkg_model_config_validate(&cfg) == VKG_OK);
    vkg_param_table t;
    vkg_model_params(&cfg, &t);
    FUZZ_REQUIRE(t.n > 0 && t.total > 0);
    return 0;
}
