/* The rounding of gradients to bf16 for the exchange between ranks (src/parallel/grad_bf16.c)
 * against an independent reference that picks, in double arithmetic, the nearer of the two bf16
 * values around x (the even one on a tie; past the largest bf16, infinity once x reaches the
 * midpoint between it and 2^128, as IEEE rounding does):
 *  - every bf16 value (all 65536 upper halves: normals, subnormals, zeros, infinities, NaNs) with
 *    the lower halves 0, 1, 0x7fff, 0x8000 (the tie), 0x8001, 0xffff and a random one, rounded
 *    one at a time and as one array; the model files' rounding (vkg_f32_to_bf16) gives the same
 *    bits on all of them;
 *  - named cases: ties to even downward and upward, the carry into the exponent, the largest
 *    finite fp32 (rounds to infinity), the smallest subnormal (kept, not flushed), negative
 *    zero, infinities, quiet and signalling NaNs of both signs (NaN stays NaN, sign kept, quiet);
 *  - widening is exact: every non-NaN bf16 widened and rounded again is itself;
 *  - the checker bites: a truncating rounding fails against the reference. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "parallel/grad_bf16.h"
#include "vkgpt/io.h"

static float from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* The magnitude of bf16 bits h (without sign) as a double; 0x7f80 (one past the largest finite
 * bf16) as 2^128, where rounding to nearest would put the next value. */
static double magnitude(uint16_t h)
{
    if ((h & 0x7fffu) == 0x7f80u)
        return ldexp(1.0, 128);
    return fabs((double)from_bits((uint32_t)h << 16));
}

/* The reference: x's bf16 by comparing distances in double (NaN: a quiet NaN of x's sign). */
static uint16_t reference(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint16_t sign = (uint16_t)(u >> 16 & 0x8000u);
    if (isnan(x))
        return 0; /* checked apart: any quiet NaN of the sign */
    if (isinf(x))
        return (uint16_t)(sign | 0x7f80u);
    uint16_t lo = (uint16_t)(u >> 16 & 0x7fffu), hi = (uint16_t)(lo + 1);
    double d = fabs((double)x), dlo = magnitude(lo), dhi = magnitude(hi);
    uint16_t pick = d - dlo < dhi - d ? lo : d - dlo > dhi - d ? hi : (lo & 1u) ? hi : lo;
    return (uint16_t)(sign | pick);
}

typedef uint16_t (*round_fn)(float);

static uint16_t narrow1(float x)
{
    uint16_t h;
    vkg_grad_bf16_narrow(&x, &h, 1);
    return h;
}

static uint16_t truncating(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (uint16_t)(u >> 16);
}

/* Mismatches of fn against the reference over the value x; prints the first few. */
static int check(round_fn fn, float x, int *shown)
{
    uint16_t got = fn(x);
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    int ok;
    if (isnan(x))
        ok = (got & 0x7f80u) == 0x7f80u && (got & 0x7fu) && (got & 0x40u) &&
             (got & 0x8000u) == (u >> 16 & 0x8000u);
    else
        ok = got == reference(x);
    if (!ok && (*shown)++ < 5)
        printf("x = %.9g (bits %08x): got %04x, expected %04x\n", (double)x, (unsigned)u,
               (unsigned)got, (unsigned)reference(x));
    return !ok;
}

/* Mismatches over every upper half with a few lower halves each. */
static int sweep(round_fn fn)
{
    static const uint32_t lows[] = {0, 1, 0x7fff, 0x8000, 0x8001, 0xffff};
    uint64_t rng = 0x243F6A8885A308D3ull;
    int bad = 0, shown = 0;
    for (uint32_t hi = 0; hi < 0x10000u; hi++) {
        for (size_t i = 0; i < sizeof lows / sizeof lows[0]; i++)
            bad += check(fn, from_bits(hi << 16 | lows[i]), &shown);
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        bad += check(fn, from_bits(hi << 16 | (uint32_t)(rng & 0xffffu)), &shown);
    }
    return bad;
}

static void test_every_bf16_value(void **state)
{
    (void)state;
    int bad = sweep(narrow1);
    if (bad)
        fail_msg("%d values rounded unlike the reference", bad);
    bad = sweep(vkg_f32_to_bf16);
    if (bad)
        fail_msg("vkg_f32_to_bf16: %d values rounded unlike the reference", bad);
    /* the whole sweep as one array (the loop the exchange runs, vectorised) */
    static float xs[0x10000 * 4];
    static uint16_t got[0x10000 * 4];
    uint64_t rng = 0x13198A2E03707344ull;
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        xs[i] =
            from_bits((uint32_t)(i / 4) << 16 | (i % 4 == 0 ? 0x8000u : (uint32_t)rng & 0xffffu));
    }
    vkg_grad_bf16_narrow(xs, got, sizeof xs / sizeof xs[0]);
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++)
        if (got[i] != vkg_f32_to_bf16(xs[i]) || got[i] != narrow1(xs[i]))
            fail_msg("element %zu (%08x): %04x as an array, %04x alone, %04x by vkg_f32_to_bf16", i,
                     (unsigned)((uint32_t)(i / 4) << 16), (unsigned)got[i],
                     (unsigned)narrow1(xs[i]), (unsigned)vkg_f32_to_bf16(xs[i]));
}

static void test_named_cases(void **state)
{
    (void)state;
    static const struct {
        uint32_t x;
        uint16_t want;
        const char *what;
    } cases[] = {
        {0x3f808000u, 0x3f80, "a tie to the even value below"},
        {0x3f818000u, 0x3f82, "a tie to the even value above"},
        {0x3f808001u, 0x3f81, "just past a tie"},
        {0x3f807fffu, 0x3f80, "just short of a tie"},
        {0x3fffffffu, 0x4000, "the carry into the exponent"},
        {0x7f7fffffu, 0x7f80, "the largest fp32 rounds to infinity"},
        {0x7f7f7fffu, 0x7f7f, "just below the overflow midpoint stays finite"},
        {0x00000001u, 0x0000, "the smallest subnormal rounds to zero"},
        {0x00008000u, 0x0000, "a subnormal tie to even zero"},
        {0x00018000u, 0x0002, "a subnormal tie to even upward"},
        {0x00010000u, 0x0001, "the smallest bf16 subnormal, kept"},
        {0x807fffffu, 0x8080, "the largest negative subnormal up into the normals"},
        {0x80000000u, 0x8000, "negative zero"},
        {0x7f800000u, 0x7f80, "infinity"},
        {0xff800000u, 0xff80, "negative infinity"},
        {0x7fc00000u, 0x7fc0, "a quiet NaN"},
        {0xff800001u, 0xffc0, "a negative signalling NaN with a low payload, made quiet"},
        {0x7f810000u, 0x7fc1, "a signalling NaN with an upper payload, kept and made quiet"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = narrow1(from_bits(cases[i].x));
        if (got != cases[i].want)
            fail_msg("%s: %08x rounded to %04x, expected %04x", cases[i].what, (unsigned)cases[i].x,
                     (unsigned)got, (unsigned)cases[i].want);
    }
}

static void test_widen_is_exact(void **state)
{
    (void)state;
    static uint16_t all[0x10000], again[0x10000];
    static float wide[0x10000];
    for (uint32_t h = 0; h < 0x10000u; h++)
        all[h] = (uint16_t)h;
    vkg_grad_bf16_widen(all, wide, 0x10000);
    vkg_grad_bf16_narrow(wide, again, 0x10000);
    for (uint32_t h = 0; h < 0x10000u; h++) {
        uint32_t u;
        memcpy(&u, &wide[h], sizeof u);
        assert_int_equal(u, h << 16);
        if (!isnan(wide[h]))
            assert_int_equal(again[h], h);
    }
}

static void test_checker_bites(void **state)
{
    (void)state;
    int bad = sweep(truncating);
    printf("a truncating rounding: %d mismatches\n", bad);
    assert_true(bad > 0x10000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_bf16_value),
        cmocka_unit_test(test_named_cases),
        cmocka_unit_test(test_widen_is_exact),
        cmocka_unit_test(test_checker_bites),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
