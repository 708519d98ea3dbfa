/* Tests for src/base: status names, messages and the error macros. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "base/error.h"

static vkg_status fails_when_negative(int x)
{
    VKG_CHECK(x >= 0, VKG_ERR_INVALID_ARG, "x must be >= 0, got %d", x);
    return VKG_OK;
}

static vkg_status propagates(int x)
{
    VKG_TRY(fails_when_negative(x));
    return VKG_OK;
}

static void test_status_names(void **state)
{
    (void)state;
    assert_string_equal(vkg_status_name(VKG_OK), "VKG_OK");
    assert_string_equal(vkg_status_name(VKG_ERR_IO), "VKG_ERR_IO");
    assert_string_equal(vkg_status_str(VKG_ERR_TIMEOUT), "deadline exceeded");
    assert_string_equal(vkg_status_name((vkg_status)-999), "VKG_UNKNOWN_STATUS");
}

static void test_check_records_message(void **state)
{
    (void)state;
    vkg_error_clear();
    assert_int_equal(propagates(3), VKG_OK);
    assert_string_equal(vkg_error_message(), "");
    assert_int_equal(propagates(-4), VKG_ERR_INVALID_ARG);
    const char *m = vkg_error_message();
    assert_non_null(strstr(m, "test_base.c:"));
    assert_non_null(strstr(m, "x must be >= 0, got -4"));
    vkg__error_wrap(VKG_ERR_INVALID_ARG, "loading %s", "model.bin");
    assert_non_null(strstr(vkg_error_message(), "loading model.bin: test_base.c:"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_check_records_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
