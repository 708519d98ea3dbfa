/* The comm tests' allreduce sweep (test_comm_harness.h): inputs in every dtype, the exact check
 * of integer-valued results, and the loop over counts, dtypes, ops and inputs that test_comm_shm
 * and test_comm_direct share. */
#include <stdlib.h>
#include <string.h>

#include "test_comm_harness.h"

float vkg_th_from16(uint16_t h, vkg_comm_dtype dt)
{
    if (dt == VKG_COMM_BF16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e ? (1.0f + (float)m / 1024.0f) * (float)(1 << e) / 32768.0f : (float)m / 16777216.0f;
    return (h & 0x8000) ? -v : v;
}

void vkg_th_fill(void *buf, size_t count, vkg_comm_dtype dt, int r, int odd)
{
    for (size_t i = 0; i < count; i++) {
        float v = odd ? vkg_th_odd_value(r, i, 12) : vkg_th_int_value(r, i);
        if (dt == VKG_COMM_F32)
            ((float *)buf)[i] = v;
        else
            ((uint16_t *)buf)[i] = vkg_th_to16(v, dt);
    }
}

int vkg_th_count_wrong(const void *dst, size_t count, vkg_comm_dtype dt, vkg_comm_op op, int n)
{
    int wrong = 0;
    /* averages of 16-bit values are rounded to 16 bits: compare within half a unit of the type */
    float tol = dt == VKG_COMM_F32 || op == VKG_COMM_SUM ? 0.0f
                : dt == VKG_COMM_BF16                    ? 1.0f / 64 * 8
                                                         : 1.0f / 1024 * 8;
    for (size_t i = 0; i < count; i++) {
        float sum = 0;
        for (int q = 0; q < n; q++)
            sum += vkg_th_int_value(q, i);
        float want = op == VKG_COMM_AVG ? sum / (float)n : sum;
        float got = dt == VKG_COMM_F32 ? ((const float *)dst)[i]
                                       : vkg_th_from16(((const uint16_t *)dst)[i], dt);
        float d = got - want;
        wrong += d > tol || d < -tol;
    }
    return wrong;
}

vkg_status vkg_th_sweep_run(vkg_th_rank *r, const vkg_th_sweep *s, int *wrong, int *bad,
                            uint64_t *digest)
{
    vkg_status st = VKG_OK;
    *wrong = *bad = 0;
    *digest = 0;
    for (int ci = 0; ci < s->ncounts && st == VKG_OK; ci++) {
        size_t count = s->counts[ci];
        for (int d = 0; d < 3 && st == VKG_OK; d++) {
            vkg_comm_dtype dt = (vkg_comm_dtype)d;
            size_t es = vkg_comm_dtype_size(dt), bytes = count * es + 8;
            if (!(s->dtypes & (1 << d)))
                continue;
            uint8_t *buf = s->get ? s->get(r, s->arg, bytes) : malloc(bytes);
            uint8_t *out = s->get ? s->get(r, s->arg, bytes) : malloc(bytes);
            if (!buf || !out)
                st = VKG_ERR_NOMEM;
            for (int op = 0; op < 2 && st == VKG_OK; op++)
                for (int odd = 0; odd <= s->odd && st == VKG_OK; odd++) {
                    uint8_t *in = op ? buf + es : buf, *dst = op ? out + es : buf;
                    vkg_th_fill(in, count, dt, r->rank, odd);
                    if (s->call)
                        *bad += s->call(r, s->arg, in, dst, count, dt, (vkg_comm_op)op, &st);
                    else
                        st = vkg_comm_allreduce(r->comm, in, dst, count, dt, (vkg_comm_op)op);
                    if (st != VKG_OK)
                        break;
                    *digest = *digest * 1099511628211ull ^ vkg_th_digest(dst, count * es);
                    if (!odd)
                        *wrong += vkg_th_count_wrong(dst, count, dt, (vkg_comm_op)op, r->size);
                }
            for (int k = 0; k < 2; k++) {
                void *p = k ? out : buf;
                if (p && s->put)
                    s->put(r, s->arg, p);
                else
                    free(p);
            }
        }
    }
    return st;
}
