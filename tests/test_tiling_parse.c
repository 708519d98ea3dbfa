/* The --tiles parser (vkg_matmul_tiling_parse): the explicit form with its subgroup and
 * buffering suffixes, table entries as the table has them or with their buffering overridden, and
 * each error naming the value and what was expected. No device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "vkgpt/tuning.h"
#include "vkgpt/status.h"

/* --tiles: the forms the parser takes, and each error naming the value. */
static void test_tiling_parse(void **state)
{
    (void)state;
    vkg_matmul_tiling t;
    assert_int_equal(vkg_matmul_tiling_parse("128x128x16:8x8", &t), VKG_OK);
    assert_true(t.bm == 128 && t.bn == 128 && t.bk == 16 && t.tm == 8 && t.tn == 8 &&
                t.subgroup == 0);
    assert_int_equal(vkg_matmul_tiling_parse("48x40x12:3x5/32", &t), VKG_OK);
    assert_true(t.bm == 48 && t.bn == 40 && t.bk == 12 && t.tm == 3 && t.tn == 5 &&
                t.subgroup == 32);
    assert_int_equal(vkg_matmul_tiling_parse("128x128x16:8x8+db", &t), VKG_OK);
    assert_true(t.bm == 128 && t.tn == 8 && t.subgroup == 0 && t.dbuf == 1);
    assert_int_equal(vkg_matmul_tiling_parse("48x40x12:3x5/32+db", &t), VKG_OK);
    assert_true(t.bm == 48 && t.tn == 5 && t.subgroup == 32 && t.dbuf == 1);
    assert_int_equal(vkg_matmul_tiling_parse("48x40x12:3x5/32+sb", &t), VKG_OK);
    assert_true(t.bm == 48 && t.subgroup == 32 && t.dbuf == 0);
    /* an entry as the table has it, or with its buffering overridden */
    static const struct {
        const char *value, *entry;
        int dbuf; /* -1: the table's */
    } named[] = {{"amd-medium", "amd-medium", -1},       {"nvidia-large", "nvidia-large", -1},
                 {"nvidia-large+sb", "nvidia-large", 0}, {"intel-small", "intel-small", -1},
                 {"intel-small+db", "intel-small", 1},   {"intel-small+sb", "intel-small", 0}};
    for (size_t v = 0; v < sizeof named / sizeof named[0]; v++) {
        assert_int_equal(vkg_matmul_tiling_parse(named[v].value, &t), VKG_OK);
        vkg_matmul_tiling e;
        int found = 0;
        for (int i = 0; i < vkg_matmul_tiling_count(); i++)
            if (!strcmp(vkg_matmul_tiling_entry(i, &e), named[v].entry)) {
                found = 1;
                if (named[v].dbuf >= 0)
                    e.dbuf = (uint32_t)named[v].dbuf;
                assert_memory_equal(&t, &e, sizeof t);
            }
        assert_true(found);
    }
    /* the table's choices: double buffered for NVIDIA's and AMD's medium and large tiles */
    assert_int_equal(vkg_matmul_tiling_parse("nvidia-large", &t), VKG_OK);
    assert_int_equal(t.dbuf, 1);
    assert_int_equal(vkg_matmul_tiling_parse("amd-small", &t), VKG_OK);
    assert_int_equal(t.dbuf, 0);
    assert_null(vkg_matmul_tiling_entry(vkg_matmul_tiling_count(), NULL));
    static const struct {
        const char *value, *says;
    } bad[] = {
        {"", "empty"},
        {"128x128x16", "expected BMxBNxBK:TMxTN"},
        {"128x128x16:8x8/", "expected BMxBNxBK:TMxTN"},
        {"128x128x16:8x8x", "'128x128x16:8x8x'"},
        {"300x128x16:8x8", "'300x128x16:8x8': expected"},
        {"128x128x0:8x8", "expected"},
        {"128x128x16:17x8", "expected"},
        {"-4x128x16:8x8", "no such table entry"},
        {"100x128x16:8x8", "block 100x128 is not a whole number of 8x8 tiles"},
        {"256x256x16:1x4", "16384 invocations"},
        {"64x64x16:4x4/24", "subgroup size 24 is not a power of two"},
        {"nvidia-huge", "'nvidia-huge': no such table entry"},
        {"NVIDIA-large", "no such table entry"},
        {"128x128x16:8x8+dB", "'128x128x16:8x8+dB': unknown suffix '+dB' (+db: double"},
        {"128x128x16:8x8+", "unknown suffix '+'"},
        {"nvidia-large+db/32", "unknown suffix '+db/32'"},
        {"+db", "'+db': expected BMxBNxBK:TMxTN[/SG] or a table entry before '+db'"},
        {"128x128x16:8x8+db+db", "expected BMxBNxBK:TMxTN[/SG][+db|+sb]"},
        {"128x128x16+db", "e.g. 128x128x16:8x8+db"},
        {"nvidia-huge+sb", "'nvidia-huge+sb': no such table entry"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(vkg_matmul_tiling_parse(bad[i].value, &t), VKG_ERR_INVALID_ARG);
        if (!strstr(vkg_error_message(), bad[i].says))
            fail_msg("--tiles '%s': got \"%s\", wanted \"%s\"", bad[i].value, vkg_error_message(),
                     bad[i].says);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiling_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
