/* The bf16 reduce-scatter's checks, shared by test_comm_coll.c (ZeroMQ and, over ipc and tcp,
 * the segment) and test_comm_shm.c (the segment's slots and pools): inputs whose fp32 sum shows
 * the order of additions and whose rounding shows the rounding mode, an independent reference
 * (the sum in fp32 in the allreduce's order, rounded once to nearest even by comparing distances,
 * not by the transport's bit trick), and one case that compares a rank's
 * chunk bitwise with both the reference and the bf16 allreduce's result. Not here: launching the
 * ranks (test_comm_harness.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_comm_harness.h"

static float bf16_float(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t vkg_th_sc_input(int kase, int r, size_t i)
{
    uint32_t h = vkg_th_mix((uint32_t)kase * 0x9E3779B9u ^ vkg_th_mix((uint32_t)r * 7919u + 1u) ^
                            vkg_th_mix((uint32_t)i));
    /* Half the values about 2^23, of two magnitudes only, so that they often cancel; then what
     * the sum kept of the small ones (2^-1 .. 2^11) depends on when they were added. */
    static const int exps[] = {16, 16, -8, 3};
    int e = exps[(h >> 8) % 4];
    uint32_t m = e == 16 ? 128 + (h & 1) : 128 + (h & 127); /* 8 significant bits: a bf16 */
    float v = ldexpf((float)m, e);
    if (h & 0x80000000u)
        v = -v;
    uint32_t u;
    memcpy(&u, &v, 4);
    return (uint16_t)(u >> 16);
}

int vkg_th_sc_first(size_t count, int n, size_t i, int ring)
{
    int k = 0;
    while (ring && k + 1 < n &&
           count / (size_t)n * (size_t)(k + 1) + count % (size_t)n * (size_t)(k + 1) / (size_t)n <=
               i)
        k++;
    return k;
}

/* x rounded to bf16: the two bf16 values around x, the nearer one, the even one on a tie (or,
 * to prove the checks bite, the one toward zero). Finite x only. */
static uint16_t round_bf16(float x, int truncate)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1); /* |lo| <= |x| < |hi| */
    if (truncate || bf16_float(lo) == x)
        return lo;
    double dl = fabs((double)x - bf16_float(lo)), dh = fabs((double)bf16_float(hi) - x);
    return dl < dh || (dl == dh && !(lo & 1)) ? lo : hi;
}

uint16_t vkg_th_sc_reference(int kase, int n, size_t i, int first, int truncate)
{
    float acc = bf16_float(vkg_th_sc_input(kase, first, i));
    for (int j = 1; j < n; j++)
        acc += bf16_float(vkg_th_sc_input(kase, (first + j) % n, i)); /* fp32 steps */
    return round_bf16(acc, truncate);
}

int vkg_th_sc_case(vkg_th_rank *r, int kase, size_t count, const size_t *bounds, int ring,
                   uint16_t *buf, uint64_t *dig)
{
    int n = r->size, me = r->rank, bad = 0;
    uint16_t *in = calloc(count + 1, 2), *ar = malloc(count * 2 + 2);
    if (!in || !ar) {
        free(in), free(ar);
        vkg_th_report(r, "FAIL out of memory; ");
        return 1;
    }
    for (size_t i = 0; i < count; i++)
        in[i] = vkg_th_sc_input(kase, me, i);
    memset(ar, 0xA5, count * 2); /* poison */
    vkg_status st = vkg_comm_allreduce(r->comm, in, ar, count, VKG_COMM_BF16, VKG_COMM_SUM);
    if (count)
        memcpy(buf, in, count * 2);
    if (st == VKG_OK)
        st = vkg_comm_reduce_scatter_dtype(r->comm, buf, count, bounds, VKG_COMM_BF16);
    if (st != VKG_OK) {
        vkg_th_report(r, "FAIL bf16 reduce-scatter count %zu: %s; ", count, vkg_error_message());
        free(in), free(ar);
        return 1;
    }
    for (size_t i = 0; i < count && bad < 3; i++) {
        int own = i >= bounds[me] && i < bounds[me + 1];
        uint16_t want =
            own ? vkg_th_sc_reference(kase, n, i, vkg_th_sc_first(count, n, i, ring), 0) : in[i];
        if (buf[i] != want || (own && buf[i] != ar[i])) {
            vkg_th_report(r,
                          "FAIL bf16 reduce-scatter count %zu%s [%zu] (%s) = 0x%04x, reference "
                          "0x%04x, allreduce 0x%04x; ",
                          count, ring ? " (ring order)" : "", i, own ? "own chunk" : "another's",
                          buf[i], want, ar[i]);
            bad++;
        }
    }
    *dig = *dig * 1099511628211ull ^ vkg_th_digest(ar, count * 2);
    free(in), free(ar);
    return bad;
}
