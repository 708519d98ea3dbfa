/* SPIR-V rewriter: a module written with SPV_NV_cooperative_matrix (what Debian 12's glslang
 * compiles) turned into the same module with SPV_KHR_cooperative_matrix, for devices whose
 * drivers expose only VK_KHR_cooperative_matrix (AMD, Intel). The numbers are those of the
 * SPIR-V registry (SPIRV-Headers, spirv.core.grammar.json):
 *   capability CooperativeMatrixNV 5357          -> CooperativeMatrixKHR 6022
 *   extension "SPV_NV_cooperative_matrix"        -> "SPV_KHR_cooperative_matrix"
 *   OpTypeCooperativeMatrixNV 5358 (id, component, scope, rows, columns)
 *     -> OpTypeCooperativeMatrixKHR 4456 (id, component, scope, rows, columns, use): use is the id
 *        of a uint constant MatrixA 0, MatrixB 1 or MatrixAccumulator 2, inferred from how the
 *        multiply-adds use the type (refused unless exactly one)
 *   OpCooperativeMatrixLoadNV 5359 (type, id, pointer, stride, column major[, memory access])
 *     -> OpCooperativeMatrixLoadKHR 4457 (type, id, pointer, layout, stride[, memory operand]):
 *        layout the id of a uint constant RowMajor 0 or ColumnMajor 1, from the NV operand, which
 *        must be OpConstantTrue or OpConstantFalse
 *   OpCooperativeMatrixStoreNV 5360 (pointer, object, stride, column major[, memory access])
 *     -> OpCooperativeMatrixStoreKHR 4458 (pointer, object, layout, stride[, memory operand])
 *   OpCooperativeMatrixMulAddNV 5361 -> OpCooperativeMatrixMulAddKHR 4459 (same operands; no
 *        cooperative matrix operands: floating-point)
 *   OpCooperativeMatrixLengthNV 5362 -> OpCooperativeMatrixLengthKHR 4460 (same operands)
 * The three uint constants 0, 1, 2 are added right after the module's 32-bit unsigned integer
 * type (which the NV types' scope constants need), with new ids. It does not validate the module
 * beyond what the rewrite reads (a module without cooperative matrices comes back unchanged);
 * element-wise and conversion instructions on cooperative
 * matrices are the same in both extensions and are copied. */
#include <stdlib.h>
#include <string.h>

#include "vk/coopmat.h"

enum {
    OP_EXTENSION = 10,
    OP_TYPE_INT = 21,
    OP_CONSTANT_TRUE = 41,
    OP_CONSTANT_FALSE = 42,
    OP_CONSTANT = 43,
    OP_CAPABILITY = 17,
    CAP_NV = 5357,
    CAP_KHR = 6022,
    OP_TYPE_NV = 5358,
    OP_LOAD_NV = 5359,
    OP_STORE_NV = 5360,
    OP_MULADD_NV = 5361,
    OP_LENGTH_NV = 5362,
    OP_TYPE_KHR = 4456,
    OP_LOAD_KHR = 4457,
    OP_STORE_KHR = 4458,
    OP_MULADD_KHR = 4459,
    OP_LENGTH_KHR = 4460,
};

/* Opcodes whose first two operands are a result type and a result id, among those that can
 * produce a cooperative matrix (the operands of a multiply-add are looked up among these). */
static int typed_result(uint32_t op)
{
    static const uint32_t ops[] = {1,   43,  44,  46,  55,         57,          59,  61,
                                   80,  81,  82,  83,  115,        127,         129, 131,
                                   133, 136, 169, 245, OP_LOAD_NV, OP_MULADD_NV};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (ops[i] == op)
            return 1;
    return 0;
}

typedef struct module {
    const uint32_t *w;
    size_t n;
    uint32_t bound;
    uint32_t *type_of; /* result id -> its type (0: unknown), for typed_result instructions */
    uint8_t *use;      /* NV type id -> bits 1 << use seen (A 0, B 1, accumulator 2) */
    uint8_t *is_type;  /* id -> 1 for an NV cooperative matrix type */
    uint8_t *bools;    /* id -> 1 OpConstantFalse, 2 OpConstantTrue */
} module;

/* Walk the instructions once: check the word counts, record types, bools and uses. */
static vkg_status scan(module *m, uint32_t *uint_type)
{
    *uint_type = 0;
    for (size_t i = 5; i < m->n;) {
        uint32_t wc = m->w[i] >> 16, op = m->w[i] & 0xFFFF;
        VKG_CHECK(wc >= 1 && i + wc <= m->n, VKG_ERR_INVALID_ARG,
                  "SPIR-V coopmat rewrite: instruction at word %zu has a bad word count %u", i, wc);
        const uint32_t *in = m->w + i;
        if (typed_result(op) && wc >= 3 && in[2] < m->bound)
            m->type_of[in[2]] = in[1];
        if (op == OP_TYPE_INT && wc == 4 && in[2] == 32 && in[3] == 0 && !*uint_type)
            *uint_type = in[1];
        if ((op == OP_CONSTANT_TRUE || op == OP_CONSTANT_FALSE) && wc == 3 && in[2] < m->bound)
            m->bools[in[2]] = op == OP_CONSTANT_TRUE ? 2 : 1;
        if (op == OP_TYPE_NV) {
            VKG_CHECK(wc == 6 && in[1] < m->bound, VKG_ERR_INVALID_ARG,
                      "SPIR-V coopmat rewrite: OpTypeCooperativeMatrixNV at word %zu has %u words "
                      "(6 expected)",
                      i, wc);
            m->is_type[in[1]] = 1;
        }
        i += wc;
    }
    return VKG_OK;
}

/* Mark the uses of the NV types from the multiply-adds: result and C accumulator, A, B. */
static vkg_status infer_uses(module *m)
{
    for (size_t i = 5; i < m->n; i += m->w[i] >> 16) {
        const uint32_t *in = m->w + i;
        if ((in[0] & 0xFFFF) != OP_MULADD_NV)
            continue;
        VKG_CHECK(in[0] >> 16 == 6, VKG_ERR_INVALID_ARG,
                  "SPIR-V coopmat rewrite: OpCooperativeMatrixMulAddNV at word %zu has %u words "
                  "(6 expected)",
                  i, in[0] >> 16);
        uint32_t types[4] = {in[1], 0, 0, 0}, uses[4] = {2, 0, 1, 2};
        for (int k = 1; k < 4; k++) {
            uint32_t id = in[2 + k];
            types[k] = id < m->bound ? m->type_of[id] : 0;
        }
        for (int k = 0; k < 4; k++) {
            VKG_CHECK(types[k] && types[k] < m->bound && m->is_type[types[k]], VKG_ERR_INVALID_ARG,
                      "SPIR-V coopmat rewrite: cannot tell the cooperative matrix type of "
                      "operand %d of the multiply-add at word %zu",
                      k, i);
            m->use[types[k]] |= (uint8_t)(1u << uses[k]);
        }
    }
    for (uint32_t id = 0; id < m->bound; id++) {
        if (!m->is_type[id])
            continue;
        uint8_t u = m->use[id];
        VKG_CHECK(u == 1 || u == 2 || u == 4, VKG_ERR_INVALID_ARG,
                  "SPIR-V coopmat rewrite: cooperative matrix type %%%u is %s (it must be used as "
                  "exactly one of A, B and accumulator)",
                  id,
                  u ? "used as more than one of A, B and accumulator" : "used by no multiply-add");
    }
    return VKG_OK;
}

/* The layout constant for an NV column-major operand: 1 row major -> id of 0, else id of 1. */
static vkg_status layout_of(const module *m, uint32_t flag, size_t at, const uint32_t konst[3],
                            uint32_t *id)
{
    uint8_t b = flag < m->bound ? m->bools[flag] : 0;
    VKG_CHECK(b, VKG_ERR_INVALID_ARG,
              "SPIR-V coopmat rewrite: the column-major operand %%%u at word %zu is not "
              "OpConstantTrue or OpConstantFalse",
              flag, at);
    *id = konst[b == 2 ? 1 : 0];
    return VKG_OK;
}

/* Append in's instruction (wc words) rewritten into out at *o. */
static vkg_status emit(const module *m, size_t i, uint32_t uint_type, const uint32_t konst[3],
                       uint32_t *out, size_t *o)
{
    const uint32_t *in = m->w + i;
    uint32_t wc = in[0] >> 16, op = in[0] & 0xFFFF, lay = 0;
    if (op == OP_CAPABILITY && wc == 2 && in[1] == CAP_NV) {
        out[(*o)++] = in[0], out[(*o)++] = CAP_KHR;
    } else if (op == OP_EXTENSION && wc >= 2 &&
               !strncmp((const char *)(in + 1), "SPV_NV_cooperative_matrix",
                        (size_t)(wc - 1) * 4)) {
        static const char name[] = "SPV_KHR_cooperative_matrix";
        uint32_t words = (uint32_t)(sizeof name + 3) / 4; /* with its NUL, padded */
        out[(*o)++] = (words + 1) << 16 | OP_EXTENSION;
        memset(out + *o, 0, words * 4);
        memcpy(out + *o, name, sizeof name);
        *o += words;
    } else if (op == OP_TYPE_NV) {
        uint32_t use = m->use[in[1]] == 1 ? 0 : m->use[in[1]] == 2 ? 1 : 2;
        out[(*o)++] = 7u << 16 | OP_TYPE_KHR;
        memcpy(out + *o, in + 1, 5 * 4);
        *o += 5;
        out[(*o)++] = konst[use];
    } else if (op == OP_LOAD_NV) {
        VKG_CHECK(wc >= 6, VKG_ERR_INVALID_ARG,
                  "SPIR-V coopmat rewrite: OpCooperativeMatrixLoadNV at word %zu is short", i);
        VKG_TRY(layout_of(m, in[5], i, konst, &lay));
        out[(*o)++] = wc << 16 | OP_LOAD_KHR;
        out[(*o)++] = in[1], out[(*o)++] = in[2], out[(*o)++] = in[3];
        out[(*o)++] = lay, out[(*o)++] = in[4];
        memcpy(out + *o, in + 6, (size_t)(wc - 6) * 4);
        *o += wc - 6;
    } else if (op == OP_STORE_NV) {
        VKG_CHECK(wc >= 5, VKG_ERR_INVALID_ARG,
                  "SPIR-V coopmat rewrite: OpCooperativeMatrixStoreNV at word %zu is short", i);
        VKG_TRY(layout_of(m, in[4], i, konst, &lay));
        out[(*o)++] = wc << 16 | OP_STORE_KHR;
        out[(*o)++] = in[1], out[(*o)++] = in[2];
        out[(*o)++] = lay, out[(*o)++] = in[3];
        memcpy(out + *o, in + 5, (size_t)(wc - 5) * 4);
        *o += wc - 5;
    } else {
        memcpy(out + *o, in, (size_t)wc * 4);
        if (op == OP_MULADD_NV)
            out[*o] = wc << 16 | OP_MULADD_KHR;
        if (op == OP_LENGTH_NV)
            out[*o] = wc << 16 | OP_LENGTH_KHR;
        *o += wc;
    }
    if (op == OP_TYPE_INT && wc == 4 && in[1] == uint_type)
        for (uint32_t v = 0; v < 3; v++) { /* OpConstant %uint konst[v] = v */
            out[(*o)++] = 4u << 16 | OP_CONSTANT;
            out[(*o)++] = uint_type, out[(*o)++] = konst[v], out[(*o)++] = v;
        }
    return VKG_OK;
}

vkg_status vkg__spv_coopmat_nv_to_khr(const uint32_t *in, size_t words, uint32_t **out,
                                      size_t *out_words)
{
    *out = NULL, *out_words = 0;
    VKG_CHECK(words >= 5 && in[0] == 0x07230203u && in[3] > 0 && in[3] < (1u << 24),
              VKG_ERR_INVALID_ARG,
              "SPIR-V coopmat rewrite: not a SPIR-V module (%zu words, magic 0x%08x)", words,
              words ? in[0] : 0);
    module m = {.w = in, .n = words, .bound = in[3]};
    vkg_status st = VKG_OK;
    uint32_t uint_type = 0, *res = NULL;
    m.type_of = calloc(m.bound, sizeof *m.type_of);
    m.use = calloc(m.bound, 1), m.is_type = calloc(m.bound, 1), m.bools = calloc(m.bound, 1);
    VKG_CHECK_GOTO(st, m.type_of && m.use && m.is_type && m.bools, VKG_ERR_NOMEM, done,
                   "SPIR-V coopmat rewrite: no memory for a module of bound %u", m.bound);
    VKG_TRY_GOTO(st, scan(&m, &uint_type), done);
    int any = 0; /* a module without cooperative matrices is returned as it is */
    for (size_t i = 5; i < words && !any; i += in[i] >> 16)
        any = (in[i] & 0xFFFF) == OP_CAPABILITY && (in[i] >> 16) == 2 && in[i + 1] == CAP_NV;
    for (uint32_t id = 0; id < m.bound && !any; id++)
        any = m.is_type[id];
    if (!any) {
        res = malloc(words * sizeof *res);
        VKG_CHECK_GOTO(st, res, VKG_ERR_NOMEM, done, "SPIR-V coopmat rewrite: no memory");
        memcpy(res, in, words * sizeof *res);
        *out = res, *out_words = words;
        res = NULL;
        goto done;
    }
    VKG_TRY_GOTO(st, infer_uses(&m), done);
    VKG_CHECK_GOTO(st, uint_type, VKG_ERR_INVALID_ARG, done,
                   "SPIR-V coopmat rewrite: the module has no 32-bit unsigned integer type");
    /* Each NV type gains a word, each load and store none; the extension name 1 word at most;
     * the 3 constants 12 words. */
    res = malloc((words * 2 + 16) * sizeof *res);
    VKG_CHECK_GOTO(st, res, VKG_ERR_NOMEM, done, "SPIR-V coopmat rewrite: no memory");
    uint32_t konst[3] = {m.bound, m.bound + 1, m.bound + 2};
    memcpy(res, in, 5 * sizeof *res);
    res[3] = m.bound + 3;
    size_t o = 5;
    for (size_t i = 5; i < words; i += in[i] >> 16)
        VKG_TRY_GOTO(st, emit(&m, i, uint_type, konst, res, &o), done);
    *out = res, *out_words = o;
    res = NULL;
done:
    free(res);
    free(m.type_of), free(m.use), free(m.is_type), free(m.bools);
    return st;
}
