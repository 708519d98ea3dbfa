/* Fuzz target: run.json, a run's settings (src/cli/runconf.c, vkg_cli_runconf_parse), applied
 * to a table with a flag of every type, one of them skipped. An accepted file leaves every value
 * inside its flag's range and the skipped flag untouched; a refused one names the file, keeps no
 * value and is one line of printable ASCII, whatever bytes the file holds. */
#include <math.h>
#include <string.h>

#include "cli/runconf.h"
#include "fuzz_util.h"

static const char *const choices[] = {"alpha", "beta", "gamma", NULL};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int i_range = 1, choice = 0, boolean = 0, skipped = 7;
    long long ll_range = 0;
    uint64_t u64 = 0;
    float f_range = 0.0f;
    double d = 0.0;
    const char *str = NULL;
    const vkg_flag flags[] = {
        {"--int-range", VKG_FLAG_INT, &i_range, "an int in [1, 2^20]", 0, 1, 1 << 20},
        {"--ll-range", VKG_FLAG_LL, &ll_range, "a long long in [-1e6, 1e12]", 0, -1e6, 1e12},
        {"--u64", VKG_FLAG_U64, &u64, "a uint64", 0, 0, 0},
        {"--float-range", VKG_FLAG_FLOAT, &f_range, "a float in [0, 10]", 0, 0, 10},
        {"--double", VKG_FLAG_DOUBLE, &d, "a double", 0, 0, 0},
        {"--str", VKG_FLAG_STR, &str, "a string", 0, 0, 0},
        {"--choice", VKG_FLAG_CHOICE, &choice, "a choice", choices, 0, 0},
        {"--bool", VKG_FLAG_BOOL, &boolean, "a switch", 0, 0, 0},
        {"--skipped", VKG_FLAG_INT, &skipped, "a flag not kept", 0, 0, 0},
    };
    enum { NFLAGS = sizeof flags / sizeof flags[0] };
    static const unsigned char skip[NFLAGS] = {0, 0, 0, 0, 0, 0, 0, 0, VKG_RUNCONF_SKIP};
    vkg_cli_runconf rc;
    char err[1024];
    int r = vkg_cli_runconf_parse("run.json", (const char *)data, size, flags, NFLAGS, skip, &rc,
                                  err, sizeof err);
    FUZZ_REQUIRE(r == 0 || r == 2);
    FUZZ_REQUIRE(skipped == 7);
    if (r == 2) {
        FUZZ_REQUIRE(strstr(err, "run.json") != NULL);
        for (int i = 0; i < VKG_FLAGS_MAX; i++)
            FUZZ_REQUIRE(rc.value[i] == NULL);
        for (const char *c = err; *c; c++) /* printable ASCII: one line, no control byte */
            FUZZ_REQUIRE((unsigned char)*c >= 0x20 && (unsigned char)*c < 0x7f);
        return 0;
    }
    FUZZ_REQUIRE(i_range >= 1 && i_range <= 1 << 20);
    FUZZ_REQUIRE(ll_range >= -1000000 && ll_range <= 1000000000000LL);
    FUZZ_REQUIRE(f_range >= 0.0f && f_range <= 10.0f);
    FUZZ_REQUIRE(choice >= 0 && choice < 3 && (boolean == 0 || boolean == 1));
    FUZZ_REQUIRE(!str || str == rc.value[5]);
    (void)u64, (void)d;
    vkg_cli_runconf_free(&rc);
    return 0;
}
