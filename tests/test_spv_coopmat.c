/* The SPIR-V rewriter from SPV_NV_cooperative_matrix to SPV_KHR_cooperative_matrix
 * (src/vk/spv_coopmat.c), on the CPU: the compiled cooperative-matrix kernel rewritten and read
 * back by this file's own parser (word counts, ids within the bound, no NV instruction left, the
 * KHR operand orders, each type's use as the multiply-adds need it, loads and stores keeping their
 * pointer, stride and memory operands), and small hand-built modules for the edges: a module
 * without cooperative matrices comes back unchanged; a type used as both A and B, a type no
 * multiply-add uses, a column-major flag that is not a constant, a truncated module and a wrong
 * magic are refused; a column-major load gets the ColumnMajor layout. The numbers are the SPIR-V
 * registry's (spirv.core.grammar.json). No device needed: the KHR form cannot be validated here
 * (the installed spirv-val predates it), which is why this parser checks it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "vk/coopmat.h"

enum {
    CAP = 17,
    EXT = 10,
    TYPE_INT = 21,
    TYPE_FLOAT = 22,
    CONST = 43,
    CTRUE = 41,
    CFALSE = 42,
    TYPE_VOID = 19,
    TYPE_FN = 33,
    FUNCTION = 54,
    LABEL = 248,
    UNDEF = 1,
    LOAD = 61,
    NV_TYPE = 5358,
    NV_LOAD = 5359,
    NV_STORE = 5360,
    NV_MULADD = 5361,
    KHR_TYPE = 4456,
    KHR_LOAD = 4457,
    KHR_STORE = 4458,
    KHR_MULADD = 4459,
};

typedef struct parsed {
    uint32_t bound, *const_value, *type_use, *type_of;
    uint8_t *is_const, *defined;
    int types, loads, stores, muladds, cap_khr, ext_khr, nv_left;
    uint32_t load_words[64][8], store_words[64][8];
    int load_wc[64], store_wc[64];
} parsed;

/* Read a KHR module, asserting what every well-formed result of the rewrite must hold. */
static void parse_khr(const uint32_t *w, size_t n, parsed *p)
{
    memset(p, 0, sizeof *p);
    assert_true(n >= 5);
    assert_int_equal(w[0], 0x07230203u);
    p->bound = w[3];
    p->const_value = calloc(p->bound, 4), p->type_use = calloc(p->bound, 4);
    p->type_of = calloc(p->bound, 4), p->is_const = calloc(p->bound, 1);
    p->defined = calloc(p->bound, 1);
    size_t i = 5;
    while (i < n) {
        uint32_t wc = w[i] >> 16, op = w[i] & 0xFFFF;
        const uint32_t *in = w + i;
        assert_true(wc >= 1 && i + wc <= n);
        p->nv_left += op >= 5358 && op <= 5362;
        p->nv_left += op == CAP && in[1] == 5357;
        p->cap_khr += op == CAP && in[1] == 6022;
        if (op == EXT) {
            assert_null(strstr((const char *)(in + 1), "SPV_NV_cooperative_matrix"));
            p->ext_khr += !strcmp((const char *)(in + 1), "SPV_KHR_cooperative_matrix");
        }
        if (op == CONST && wc == 4) {
            assert_true(in[2] < p->bound);
            assert_false(p->defined[in[2]]);
            p->defined[in[2]] = 1, p->is_const[in[2]] = 1, p->const_value[in[2]] = in[3];
        }
        if (op == KHR_TYPE) {
            assert_int_equal(wc, 7);
            assert_true(in[1] < p->bound && in[6] < p->bound);
            assert_true(p->is_const[in[6]]); /* the use constant is declared before the type */
            assert_true(p->const_value[in[6]] <= 2);
            p->type_use[in[1]] = 1u << p->const_value[in[6]];
            p->types++;
        }
        if ((op == UNDEF || op == LOAD || op == KHR_LOAD || op == KHR_MULADD) && wc >= 3) {
            assert_true(in[2] < p->bound);
            p->type_of[in[2]] = in[1];
        }
        if (op == KHR_LOAD) {
            assert_true(wc >= 6 && p->loads < 64);
            assert_true(p->is_const[in[4]] && p->const_value[in[4]] <= 1);
            memcpy(p->load_words[p->loads], in, (wc < 8 ? wc : 8) * 4);
            p->load_wc[p->loads++] = (int)wc;
        }
        if (op == KHR_STORE) {
            assert_true(wc >= 5 && p->stores < 64);
            assert_true(p->is_const[in[3]] && p->const_value[in[3]] <= 1);
            memcpy(p->store_words[p->stores], in, (wc < 8 ? wc : 8) * 4);
            p->store_wc[p->stores++] = (int)wc;
        }
        i += wc;
    }
    assert_int_equal(i, n);
    /* every multiply-add: A of use A, B of use B, C and result accumulators */
    for (i = 5; i < n; i += w[i] >> 16)
        if ((w[i] & 0xFFFF) == KHR_MULADD) {
            const uint32_t *in = w + i;
            assert_int_equal(in[0] >> 16, 6);
            assert_int_equal(p->type_use[in[1]], 4);
            assert_int_equal(p->type_use[p->type_of[in[3]]], 1);
            assert_int_equal(p->type_use[p->type_of[in[4]]], 2);
            assert_int_equal(p->type_use[p->type_of[in[5]]], 4);
            p->muladds++;
        }
}

static void parsed_free(parsed *p)
{
    free(p->const_value), free(p->type_use), free(p->type_of), free(p->is_const);
    free(p->defined);
}

static void test_kernel(void **state)
{
    (void)state;
    const uint32_t *nv = vkg_spv_matmul_coopmat;
    size_t n = vkg_spv_matmul_coopmat_words, m = 0;
    uint32_t *khr = NULL;
    assert_int_equal(vkg__spv_coopmat_nv_to_khr(nv, n, &khr, &m), VKG_OK);
    parsed p;
    parse_khr(khr, m, &p);
    assert_int_equal(p.bound, nv[3] + 3);
    assert_int_equal(p.nv_left, 0);
    assert_int_equal(p.cap_khr, 1);
    assert_int_equal(p.ext_khr, 1);
    assert_int_equal(p.types, 3); /* A, B and accumulator */
    assert_true(p.muladds >= 1);
    /* the NV loads and stores, in order: same pointer, stride and memory operands, row major */
    int li = 0, si = 0, nmul = 0;
    for (size_t i = 5; i < n; i += nv[i] >> 16) {
        const uint32_t *in = nv + i;
        uint32_t op = in[0] & 0xFFFF, wc = in[0] >> 16;
        nmul += op == NV_MULADD;
        if (op == NV_LOAD) {
            const uint32_t *k = p.load_words[li];
            assert_int_equal(p.load_wc[li++], (int)wc);
            assert_int_equal(k[1], in[1]);
            assert_int_equal(k[3], in[3]); /* pointer */
            assert_int_equal(k[5], in[4]); /* stride after the layout */
            assert_int_equal(p.const_value[k[4]], 0);
            for (uint32_t j = 6; j < wc && j < 8; j++)
                assert_int_equal(k[j], in[j]);
        }
        if (op == NV_STORE) {
            const uint32_t *k = p.store_words[si];
            assert_int_equal(p.store_wc[si++], (int)wc);
            assert_int_equal(k[1], in[1]);
            assert_int_equal(k[2], in[2]);
            assert_int_equal(k[4], in[3]);
            assert_int_equal(p.const_value[k[3]], 0);
            for (uint32_t j = 5; j < wc && j < 8; j++)
                assert_int_equal(k[j], in[j]);
        }
    }
    assert_int_equal(li, p.loads);
    assert_int_equal(si, p.stores);
    assert_int_equal(nmul, p.muladds);
    assert_true(li > 0 && si > 0);
    parsed_free(&p);
    free(khr);
}

static void test_no_coopmat_unchanged(void **state)
{
    (void)state;
    uint32_t *out = NULL;
    size_t m = 0, n = vkg_spv_matmul_tiled_words;
    assert_int_equal(vkg__spv_coopmat_nv_to_khr(vkg_spv_matmul_tiled, n, &out, &m), VKG_OK);
    assert_int_equal(m, n);
    assert_memory_equal(out, vkg_spv_matmul_tiled, n * 4);
    free(out);
}

/* A small module: header, capability, uint (%1), scope 3 (%2), 16 (%3), half (%4), the NV types
 * given, then a function with the given body. */
typedef struct builder {
    uint32_t w[256];
    size_t n;
} builder;

static void put(builder *b, uint32_t op, int count, const uint32_t *ops)
{
    b->w[b->n++] = (uint32_t)(count + 1) << 16 | op;
    for (int i = 0; i < count; i++)
        b->w[b->n++] = ops[i];
}
#define PUT(b, op, ...)                                                                            \
    put(b, op, (int)(sizeof((uint32_t[]){__VA_ARGS__}) / 4), (uint32_t[]){__VA_ARGS__})

/* Types %5 (16x16 half, from the given rows/cols ids) and %6 (float accumulator) and a function
 * whose multiply-add takes A = %20, B = %21, C = %22 of types ta, tb, tc. */
static void module(builder *b, uint32_t ta, uint32_t tb, uint32_t tc, int load_flag)
{
    memset(b, 0, sizeof *b);
    uint32_t head[5] = {0x07230203u, 0x00010500u, 0, 40, 0};
    memcpy(b->w, head, sizeof head);
    b->n = 5;
    PUT(b, CAP, 1);
    PUT(b, CAP, 5357);
    PUT(b, TYPE_INT, 1, 32, 0);
    PUT(b, CONST, 1, 2, 3);
    PUT(b, CONST, 1, 3, 16);
    PUT(b, TYPE_FLOAT, 4, 16);
    PUT(b, TYPE_FLOAT, 7, 32);
    PUT(b, NV_TYPE, 5, 4, 2, 3, 3);
    PUT(b, NV_TYPE, 6, 7, 2, 3, 3);
    PUT(b, NV_TYPE, 8, 4, 2, 1, 3); /* a second half type (rows from another id) */
    PUT(b, CTRUE, 30, 31);          /* %31: true (type %30 unused by the rewriter) */
    PUT(b, TYPE_VOID, 9);
    PUT(b, TYPE_FN, 10, 9);
    PUT(b, FUNCTION, 9, 11, 0, 10);
    PUT(b, LABEL, 12);
    PUT(b, UNDEF, ta, 20);
    PUT(b, UNDEF, tb, 21);
    PUT(b, UNDEF, tc, 22);
    PUT(b, NV_MULADD, tc, 23, 20, 21, 22);
    PUT(b, NV_LOAD, 5, 24, 20, 3, load_flag);
}

static vkg_status rewrite(builder *b, uint32_t **out, size_t *m)
{
    return vkg__spv_coopmat_nv_to_khr(b->w, b->n, out, m);
}

static void expect_refused(builder *b, const char *needle)
{
    uint32_t *out = NULL;
    size_t m = 0;
    vkg_status st = rewrite(b, &out, &m);
    assert_int_equal(st, VKG_ERR_INVALID_ARG);
    assert_null(out);
    if (!strstr(vkg_error_message(), needle))
        fail_msg("message '%s' lacks '%s'", vkg_error_message(), needle);
}

static void test_hand_built(void **state)
{
    (void)state;
    builder b;
    module(&b, 5, 8, 6, 31); /* A %5, B %8, C %6; the load is column major (true) */
    uint32_t *out = NULL;
    size_t m = 0;
    assert_int_equal(rewrite(&b, &out, &m), VKG_OK);
    parsed p;
    parse_khr(out, m, &p);
    assert_int_equal(p.types, 3);
    assert_int_equal(p.muladds, 1);
    assert_int_equal(p.loads, 1);
    assert_int_equal(p.const_value[p.load_words[0][4]], 1); /* ColumnMajor */
    assert_int_equal(p.type_use[5], 1);
    assert_int_equal(p.type_use[8], 2);
    assert_int_equal(p.type_use[6], 4);
    parsed_free(&p);
    free(out);

    module(&b, 5, 5, 6, 31); /* %5 as A and B */
    expect_refused(&b, "more than one");
    module(&b, 5, 8, 6, 22); /* column-major flag %22: not a constant */
    expect_refused(&b, "not OpConstantTrue or OpConstantFalse");
    module(&b, 5, 8, 6, 31);
    b.n -= 2; /* the last instruction cut short */
    expect_refused(&b, "bad word count");
    module(&b, 5, 8, 6, 31);
    b.w[0] = 0x03022307u;
    expect_refused(&b, "not a SPIR-V module");
}

/* A type declared but used by no multiply-add cannot be given a use. */
static void test_unused_type(void **state)
{
    (void)state;
    builder b;
    module(&b, 5, 8, 6, 31);
    uint32_t extra[] = {6u << 16 | NV_TYPE, 35, 7, 2, 1, 1};
    /* insert the unused type before the function: after %8's declaration (word 5 + 2 + 2 + 4 +
     * 4 + 4 + 3 + 3 + 6 + 6 + 6 = 45) */
    memmove(b.w + 45 + 6, b.w + 45, (b.n - 45) * 4);
    memcpy(b.w + 45, extra, sizeof extra);
    b.n += 6;
    expect_refused(&b, "used by no multiply-add");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel),
        cmocka_unit_test(test_no_coopmat_unchanged),
        cmocka_unit_test(test_hand_built),
        cmocka_unit_test(test_unused_type),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
