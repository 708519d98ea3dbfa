/* Tests of src/optim/schedule: warmup as llm.c, cosine and linear decay reaching the floor exactly
 * at the last step, constant after warmup, edge cases (no warmup, 1-step runs, steps past the
 * end) and config validation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>

#include "optim/schedule.h"

#define PI 3.14159265358979323846

static vkg_schedule_config make(vkg_schedule_kind kind, float lr, float frac, int warmup, int n)
{
    vkg_schedule_config c = vkg_schedule_default();
    c.kind = kind;
    c.lr = lr;
    c.lr_min_frac = frac;
    c.warmup = warmup;
    c.total_steps = n;
    assert_int_equal(vkg_schedule_validate(&c), VKG_OK);
    return c;
}

static void assert_near(double got, double want)
{
    if (fabs(got - want) > 1e-6 * fabs(want) + 1e-12) {
        fprintf(stderr, "got %.9g, want %.9g\n", got, want);
        fail();
    }
}

static void test_warmup(void **state)
{
    (void)state;
    vkg_schedule_config c = make(VKG_SCHEDULE_COSINE, 1e-3f, 0.1f, 10, 110);
    assert_near(vkg_schedule_lr(&c, 0), 1e-3 * 1 / 10); /* first step: lr/warmup */
    assert_near(vkg_schedule_lr(&c, 4), 1e-3 * 5 / 10);
    assert_near(vkg_schedule_lr(&c, 9), 1e-3);  /* last warmup step: the peak */
    assert_near(vkg_schedule_lr(&c, 10), 1e-3); /* decay starts at the peak */
    /* computed in double from the float lr, rounded once */
    assert_true(vkg_schedule_lr(&c, 3) == (float)((double)1e-3f * (3 + 1) / 10.0));
}

static void test_cosine(void **state)
{
    (void)state;
    vkg_schedule_config c = make(VKG_SCHEDULE_COSINE, 1e-3f, 0.1f, 10, 111);
    double lr = (double)1e-3f, lo = lr * (double)0.1f;
    /* decay spans steps 10..110 (100 intervals): step 60 is halfway */
    assert_near(vkg_schedule_lr(&c, 60), lo + 0.5 * (lr - lo));
    assert_near(vkg_schedule_lr(&c, 35), lo + (lr - lo) * 0.5 * (1 + cos(PI * 0.25)));
    assert_near(vkg_schedule_lr(&c, 110), lo); /* the last step is the floor */
    assert_true(vkg_schedule_lr(&c, 109) > vkg_schedule_lr(&c, 110));
    assert_near(vkg_schedule_lr(&c, 500), lo); /* past the end: the floor */
    for (int s = 11; s <= 110; s++)            /* monotone */
        assert_true(vkg_schedule_lr(&c, s) <= vkg_schedule_lr(&c, s - 1));
}

static void test_linear(void **state)
{
    (void)state;
    vkg_schedule_config c = make(VKG_SCHEDULE_LINEAR, 2e-3f, 0.25f, 0, 101);
    double lr = (double)2e-3f, lo = lr * 0.25;
    assert_near(vkg_schedule_lr(&c, 0), lr); /* no warmup: starts at the peak */
    assert_near(vkg_schedule_lr(&c, 25), lo + (lr - lo) * 0.75);
    assert_near(vkg_schedule_lr(&c, 50), (lr + lo) / 2);
    assert_near(vkg_schedule_lr(&c, 100), lo);
}

static void test_constant(void **state)
{
    (void)state;
    vkg_schedule_config c = make(VKG_SCHEDULE_CONSTANT, 5e-4f, 0.1f, 4, 50);
    assert_near(vkg_schedule_lr(&c, 0), 5e-4 / 4);
    assert_true(vkg_schedule_lr(&c, 3) == 5e-4f);
    assert_true(vkg_schedule_lr(&c, 4) == 5e-4f);
    assert_true(vkg_schedule_lr(&c, 49) == 5e-4f);
}

static void test_edges(void **state)
{
    (void)state;
    vkg_schedule_config one = make(VKG_SCHEDULE_COSINE, 1e-3f, 0.0f, 0, 1);
    assert_true(vkg_schedule_lr(&one, 0) == 1e-3f); /* a 1-step run trains at lr, not 0 */
    vkg_schedule_config two = make(VKG_SCHEDULE_LINEAR, 1e-3f, 0.0f, 0, 2);
    assert_true(vkg_schedule_lr(&two, 0) == 1e-3f);
    assert_true(vkg_schedule_lr(&two, 1) == 0.0f);
    vkg_schedule_config wu = make(VKG_SCHEDULE_COSINE, 1e-3f, 0.5f, 9, 10); /* warmup = N-1 */
    assert_true(vkg_schedule_lr(&wu, 8) == 1e-3f);
    assert_near(vkg_schedule_lr(&wu, 9), 1e-3);      /* span 0: the peak */
    assert_near(vkg_schedule_lr(&wu, 10), 0.5e-3);   /* past the end: the floor */
    assert_near(vkg_schedule_lr(&wu, -3), 1e-3 / 9); /* negative: step 0 */
    /* deterministic: the same inputs give the same bits */
    vkg_schedule_config c = make(VKG_SCHEDULE_COSINE, 6e-4f, 0.1f, 7, 1000);
    for (int s = 0; s < 1000; s += 37)
        assert_true(vkg_schedule_lr(&c, s) == vkg_schedule_lr(&c, s));
}

static void test_validate(void **state)
{
    (void)state;
    vkg_schedule_config c = vkg_schedule_default();
    assert_int_equal(vkg_schedule_validate(&c), VKG_OK);
    c.total_steps = 0;
    assert_int_equal(vkg_schedule_validate(&c), VKG_ERR_INVALID_ARG);
    c = vkg_schedule_default();
    c.lr_min_frac = 1.5f;
    assert_int_equal(vkg_schedule_validate(&c), VKG_ERR_INVALID_ARG);
    c = vkg_schedule_default();
    c.warmup = -1;
    assert_int_equal(vkg_schedule_validate(&c), VKG_ERR_INVALID_ARG);
    c = vkg_schedule_default();
    c.lr = NAN;
    assert_int_equal(vkg_schedule_validate(&c), VKG_ERR_INVALID_ARG);
    c = vkg_schedule_default();
    c.kind = VKG_SCHEDULE_NUM_KINDS;
    assert_int_equal(vkg_schedule_validate(&c), VKG_ERR_INVALID_ARG);
    assert_string_equal(vkg_schedule_kind_name(VKG_SCHEDULE_COSINE), "cosine");
    assert_string_equal(vkg_schedule_kind_name(VKG_SCHEDULE_LINEAR), "linear");
    assert_string_equal(vkg_schedule_kind_name(VKG_SCHEDULE_CONSTANT), "constant");
    assert_string_equal(vkg_schedule_kind_name(VKG_SCHEDULE_NUM_KINDS), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warmup), cmocka_unit_test(test_cosine),
        cmocka_unit_test(test_linear), cmocka_unit_test(test_constant),
        cmocka_unit_test(test_edges),  cmocka_unit_test(test_validate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
