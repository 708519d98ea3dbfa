/* The dispatch split tests' harness (dispatch_check.h): a case run with the default and a lowered
 * shader index limit, its outputs compared bit for bit, its dispatches counted and the wide
 * kernel variants it built looked up in the device's kernel cache.
 * Not here: the cases themselves (test_dispatch_split.c, test_dispatch_split_matmul.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch_check.h"
#include "ops/op_util.h"
#include "testutil.h"

static vkg_test_rng rng;

void vkg_dc_seed(uint64_t seed)
{
    vkg_test_rng_seed(&rng, seed);
}

float *vkg_dc_rnd(size_t n, float lo, float hi)
{
    return vkg_test_random(&rng, n, lo, hi);
}

int32_t *vkg_dc_tokens(size_t n, int V)
{
    int32_t *t = malloc(n * sizeof *t);
    assert_non_null(t);
    vkg_test_fill_int(&rng, t, n, V);
    return t;
}

void vkg_dc_add(op_case *k, role r, size_t n, void *host)
{
    assert_true(k->nt < MAXT);
    k->role[k->nt] = r;
    k->n[k->nt] = n;
    k->host[k->nt] = host;
    k->nt++;
}

void vkg_dc_expect_wide(op_case *k, vkg_kernel_id kernel, int spec_id)
{
    assert_true(k->nwide < MAXW);
    k->wide[k->nwide] = kernel;
    k->wide_spec[k->nwide] = spec_id;
    k->nwide++;
}

/* Pipelines of kernel k in the device's cache whose specialization constant id is 1. */
static int wide_variants(vkg_gpu *g, vkg_kernel_id k, int id)
{
    const vkg_kernel_cache *kc = &g->dev->kernels[k];
    int n = 0;
    for (int i = 0; i < kc->count; i++)
        n += kc->variants[i].nspec > id && kc->variants[i].spec[id] == 1;
    return n;
}

/* Upload k's tensors, record its op under `limit`, run it; the outputs' contents in out[i] (for
 * OUT tensors), the dispatches recorded in *dispatches. */
static void run_once(vkg_gpu *g, const op_case *k, size_t limit, void **out, int *dispatches)
{
    vkg_tensor t[MAXT];
    for (int i = 0; i < k->nt; i++)
        t[i] =
            k->host[i] ? vkg_gpu_upload(g, k->host[i], k->n[i] * 4) : vkg_gpu_poisoned(g, k->n[i]);
    vkg__op_set_max_elems(limit);
    int before = vkg_cmd_dispatch_count(g->cmd);
    vkg_status st = k->rec(g->cmd, t, k);
    *dispatches = vkg_cmd_dispatch_count(g->cmd) - before;
    vkg__op_set_max_elems(0);
    VKG_ASSERT_OK(st);
    vkg_gpu_run(g);
    for (int i = 0; i < k->nt; i++) {
        out[i] = NULL;
        if (k->role[i] != OUT)
            continue;
        out[i] = vkg_test_alloc(k->n[i]);
        vkg_gpu_download(g, t[i], out[i], k->n[i] * 4);
        vkg_gpu_expect_guard(g, k->name, t[i]);
    }
}

void vkg_dc_check(vkg_gpu *g, op_case *k)
{
    void *a[MAXT], *b[MAXT];
    int na, nb;
    vkDeviceWaitIdle(g->dev->device);
    vkg__kernels_release(g->dev); /* so a wide variant seen below was built by this case */
    run_once(g, k, VKG_OP_MAX_ELEMS, a, &na);
    for (int w = 0; w < k->nwide; w++)
        if (wide_variants(g, k->wide[w], k->wide_spec[w]) != 0)
            fail_msg("%s: the default limit built a wide variant of %s", k->name,
                     vkg__kernel_name(k->wide[w]));
    run_once(g, k, k->limit, b, &nb);
    print_message("    %-34s limit %-6zu dispatches %d -> %d", k->name, k->limit, na, nb);
    for (int w = 0; w < k->nwide; w++) {
        int n = wide_variants(g, k->wide[w], k->wide_spec[w]);
        print_message(", wide %s", vkg__kernel_name(k->wide[w]));
        if (n == 0)
            fail_msg("%s: no wide variant of %s was built under limit %zu", k->name,
                     vkg__kernel_name(k->wide[w]), k->limit);
    }
    print_message("\n");
    if (k->split && nb <= na)
        fail_msg("%s: %d dispatches under limit %zu, %d by default: not split", k->name, nb,
                 k->limit, na);
    for (int i = 0; i < k->nt; i++) {
        if (k->role[i] != OUT)
            continue;
        const uint32_t *x = a[i], *y = b[i];
        for (size_t e = 0; e < k->n[i]; e++) {
            if ((x[e] & 0x7F800000u) == 0x7F800000u && (x[e] & 0x007FFFFFu) != 0)
                fail_msg("%s: output %d element %zu is NaN (not written?)", k->name, i, e);
            if (x[e] != y[e])
                fail_msg("%s: output %d element %zu differs: %a by default, %a split", k->name, i,
                         e, (double)((const float *)x)[e], (double)((const float *)y)[e]);
        }
        free(a[i]);
        free(b[i]);
    }
    for (int i = 0; i < k->nt; i++)
        free(k->host[i]);
    memset(k, 0, sizeof *k);
}
