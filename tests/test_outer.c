/* DiLoCo's outer step (src/parallel/outer.c) over the real collectives against a CPU reference
 * written apart from it (tests/outer_ref.c): every replica's parameters known to the test, the
 * pseudo-gradients averaged in fp32 (from the fp32 sum in rank order, as the allreduce adds 2 and 3
 * ranks), or quantized to bf16, int8 or int4 and summed in fp32 in rank order, then the Nesterov
 * update.
 * On 2 and 3 ranks (threads on the inproc transport, and, except on Windows, whose harness has
 * threads only, processes over ipc, whose collectives run in the shared-memory segment), three
 * outer steps with lr 0.7 and momentum 0.9 on 20011 parameters (a last int8 chunk of 43 elements, a
 * chunk whose pseudo-gradients are all zero, chunks of magnitudes 1e-4 to 1):
 *  - fp32, bf16, int8 and int4 (an odd count: a last byte with one code): the global parameters
 *    and the momentum bitwise the reference's on
 *    every rank, and every rank's parameters set to them;
 *  - across hosts (ranks 0 and 1 on one faked host, rank 2 on another, ipc processes), the
 *    same, the fp32 sum taking the two-level allreduce;
 *  - the reference itself against the textbook form (PyTorch's SGD with nesterov=True, in
 *    double, from the same point each round): within 8 fp32 ulps of the largest magnitude in
 *    the step (the global parameters, the replicas', the momentum);
 *  - the int8 bound: with momentum 0 the momentum is the averaged pseudo-gradient, within
 *    sum_r s_r (1/2 + 2^-16) / N (s_r: rank r's scale of the element's chunk) plus the fp32
 *    sum's rounding of the exact mean, and the error reaches at least half of that bound
 *    somewhere (the bound is not loose); int4 the same with scales over 7 (and half its bound
 *    reached too); bf16 within sum_r 2^-8 |delta_r| / N plus the same;
 *  - lr 1, momentum 0 (one inner step per round, the round's result): the global parameters
 *    are bitwise the fp32 mean of the replicas' parameters (their sum in rank order / N), while
 *    the textbook order g - (sum (g - theta_r)) / N differs from it in some elements;
 *  - the checker bites: heavy-ball momentum in place of Nesterov's, or int8 rounding toward zero,
 *    fail the bitwise comparison. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "outer_ref.h"
#include "parallel/outer.h"
#include "test_comm_harness.h"
#include "vkgpt/io.h"

enum { N_PARAMS = 20011, ROUNDS = 3, MAXR = 3 };

/* Ranks as forked processes (the harness's Windows build has threads only). */
#ifdef _WIN32
#define FORK 0
#else
#define FORK 1
#endif

typedef struct outer_case {
    vkg_outer_dtype dt;
    float lr, mu;
    int rounds;
    /* threads: each rank's results (g, m, params after the last round) */
    float *g[MAXR], *m[MAXR], *p[MAXR];
} outer_case;

/* A splitmix64 stream. */
static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static float uniform(uint64_t key)
{
    return (float)((double)(mix(key) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

static void initial(float *g)
{
    for (size_t i = 0; i < N_PARAMS; i++)
        g[i] = 0.05f * uniform(i);
}

/* Replica r's parameters in round k from the global parameters g: g - delta, delta of a
 * magnitude that changes by chunk (1e-4 to 1), zero in chunk 3. */
static void replica(const float *g, int r, int k, float *p)
{
    static const float mag[] = {1e-4f, 1e-3f, 1e-2f, 1e-1f, 1.0f};
    for (size_t i = 0; i < N_PARAMS; i++) {
        size_t c = i / VKG_OUTER_INT8_CHUNK;
        float d =
            c == 3 ? 0.0f : mag[c % 5] * uniform(((uint64_t)k << 40) ^ ((uint64_t)r << 32) ^ i);
        p[i] = g[i] - d;
    }
}

/* The reference's rounds of case c on N replicas: g and m after them (and the params). */
static void ref_run(int N, const outer_case *c, int brk, float *g, float *m)
{
    float *P[MAXR];
    for (int r = 0; r < N; r++)
        assert_non_null(P[r] = malloc(N_PARAMS * sizeof(float)));
    initial(g);
    memset(m, 0, N_PARAMS * sizeof *m);
    for (int k = 0; k < c->rounds; k++) {
        for (int r = 0; r < N; r++)
            replica(g, r, k, P[r]);
        vkg_test_outer_ref(N, N_PARAMS, P, g, m, c->dt, c->lr, c->mu, brk);
    }
    for (int r = 0; r < N; r++)
        free(P[r]);
}

/* ---- vkgpt's outer step on N ranks ------------------------------------------------------------
 */

static int rank_body(vkg_th_rank *r, void *arg)
{
    outer_case *c = arg;
    vkg_outer *o = NULL;
    vkg_status st = vkg_outer_create(N_PARAMS, c->lr, c->mu, c->dt, &o);
    float *p = malloc(N_PARAMS * sizeof *p);
    vkg_group_t *world = NULL;
    if (st == VKG_OK)
        st = vkg_group_world(r->comm, 1, &world);
    if (st != VKG_OK || !p) {
        vkg_th_report(r, "create: %s", vkg_error_message());
        vkg_outer_destroy(&o);
        free(p);
        return 1;
    }
    initial(vkg_outer_global(o));
    uint64_t bytes = 0;
    for (int k = 0; k < c->rounds && st == VKG_OK; k++) {
        replica(vkg_outer_global(o), r->rank, k, p);
        st = vkg_outer_step(o, world, p, &bytes);
    }
    vkg_group_destroy(&world);
    if (st != VKG_OK) {
        vkg_th_report(r, "step: %s", vkg_error_message());
        vkg_outer_destroy(&o);
        free(p);
        return 1;
    }
    int same = !memcmp(p, vkg_outer_global(o), N_PARAMS * sizeof *p);
    uint64_t dig = vkg_th_digest(vkg_outer_global(o), N_PARAMS * 4) * 31 ^
                   vkg_th_digest(vkg_outer_momentum(o), N_PARAMS * 4);
    vkg_th_report(r, "digest=%016llx params=%s bytes=%llu path=%s", (unsigned long long)dig,
                  same ? "global" : "OTHER", (unsigned long long)bytes, vkg_comm_path(r->comm));
    if (r->fd < 0 && r->rank < MAXR) { /* threads: the arrays themselves */
        memcpy(c->g[r->rank], vkg_outer_global(o), N_PARAMS * 4);
        memcpy(c->m[r->rank], vkg_outer_momentum(o), N_PARAMS * 4);
        memcpy(c->p[r->rank], p, N_PARAMS * 4);
    }
    vkg_outer_destroy(&o);
    free(p);
    return same ? 0 : 1;
}

/* Run c on N ranks (threads over inproc, or processes over ipc) and compare with the reference
 * bit for bit: every rank's digest, and for threads every rank's arrays. */
static void run_case_on(int N, outer_case *c, int processes, const char *hosts)
{
    float *g = malloc(N_PARAMS * sizeof *g), *m = malloc(N_PARAMS * sizeof *m);
    assert_true(g && m);
    for (int r = 0; r < MAXR; r++) {
        c->g[r] = calloc(N_PARAMS, sizeof(float));
        c->m[r] = calloc(N_PARAMS, sizeof(float));
        c->p[r] = calloc(N_PARAMS, sizeof(float));
        assert_true(c->g[r] && c->m[r] && c->p[r]);
    }
    ref_run(N, c, VKG_TEST_OUTER_EXACT, g, m);
    char want[64];
    snprintf(
        want, sizeof want, "digest=%016llx",
        (unsigned long long)(vkg_th_digest(g, N_PARAMS * 4) * 31 ^ vkg_th_digest(m, N_PARAMS * 4)));
    vkg_th_opts o = {.transport = processes ? VKG_COMM_IPC : VKG_COMM_INPROC,
                     .processes = processes,
                     .hosts = hosts,
                     .wall_s = 120};
    vkg_th_result res[VKG_TH_MAX_RANKS];
    vkg_th_run(N, &o, rank_body, c, res);
    int ok = 1;
    for (int r = 0; r < N; r++) {
        ok &= res[r].create_status == VKG_OK && res[r].body_rc == 0;
        ok &= !strncmp(res[r].report, want, strlen(want));
    }
    if (!ok) {
        fprintf(stderr, "%s, %d ranks (%s): expected %s\n", vkg_outer_dtype_name(c->dt), N,
                processes ? "ipc processes" : "inproc threads", want);
        vkg_th_dump(res, N);
    }
    if (hosts && !strstr(res[0].report, "path=hier (2 hosts")) {
        vkg_th_dump(res, N);
        fail_msg("across hosts %s: not the two-level path", hosts);
    }
    assert_true(ok);
    printf("%s on %d ranks (%s%s%s): bitwise the reference's, %s\n", vkg_outer_dtype_name(c->dt), N,
           processes ? "ipc processes" : "inproc threads", hosts ? ", hosts " : "",
           hosts ? hosts : "", strstr(res[0].report, "bytes="));
    for (int r = 0; r < N && !processes; r++) {
        assert_memory_equal(c->g[r], g, N_PARAMS * 4);
        assert_memory_equal(c->m[r], m, N_PARAMS * 4);
        assert_memory_equal(c->p[r], g, N_PARAMS * 4);
    }
    for (int r = 0; r < MAXR; r++)
        free(c->g[r]), free(c->m[r]), free(c->p[r]);
    free(g), free(m);
}

static void run_case(int N, outer_case *c, int processes)
{
    run_case_on(N, c, processes, NULL);
}

#if FORK
/* Across hosts (faked by the harness's host tags): ranks 0 and 1 on one host, rank 2 on
 * another, so the fp32 allreduce is the two-level one (the host's sum, then the hosts'), which
 * adds (x0 + x1) + x2, the reference's rank order; bf16 and int8 go through the allgather across
 * hosts. */
static void test_across_hosts(void **state)
{
    (void)state;
    for (int dt = VKG_OUTER_F32; dt <= VKG_OUTER_INT4; dt++) {
        outer_case c = {.dt = (vkg_outer_dtype)dt, .lr = 0.7f, .mu = 0.9f, .rounds = ROUNDS};
        run_case_on(3, &c, 1, "aab");
    }
}

#endif

/* Case dt (lr 0.7, momentum 0.9) on 2 and 3 ranks, threads and (except on Windows) processes. */
static void run_dtype(vkg_outer_dtype dt)
{
    outer_case c = {.dt = dt, .lr = 0.7f, .mu = 0.9f, .rounds = ROUNDS};
    for (int N = 2; N <= 3; N++) {
        run_case(N, &c, 0);
        if (FORK)
            run_case(N, &c, 1);
    }
}

static void test_fp32(void **state)
{
    (void)state;
    run_dtype(VKG_OUTER_F32);
}

static void test_bf16(void **state)
{
    (void)state;
    run_dtype(VKG_OUTER_BF16);
}

static void test_int8(void **state)
{
    (void)state;
    run_dtype(VKG_OUTER_INT8);
}

static void test_int4(void **state)
{
    (void)state;
    run_dtype(VKG_OUTER_INT4);
}

/* The reference against PyTorch's SGD(nesterov=True) in double, over the same rounds. */
static void test_reference_is_nesterov(void **state)
{
    (void)state;
    outer_case c = {.dt = VKG_OUTER_F32, .lr = 0.7f, .mu = 0.9f, .rounds = ROUNDS};
    for (int N = 2; N <= 3; N++) {
        float *g = malloc(N_PARAMS * 4), *m = malloc(N_PARAMS * 4), *P[MAXR];
        double *G = malloc(N_PARAMS * 8), *M = calloc(N_PARAMS, 8), *S = malloc(N_PARAMS * 8);
        assert_true(g && m && G && M && S);
        for (int r = 0; r < N; r++)
            assert_non_null(P[r] = malloc(N_PARAMS * 4));
        initial(g);
        memset(m, 0, N_PARAMS * 4);
        for (size_t i = 0; i < N_PARAMS; i++)
            G[i] = g[i];
        double worst = 0.0;
        for (int k = 0; k < c.rounds; k++) {
            for (int r = 0; r < N; r++)
                replica(g, r, k, P[r]);
            for (size_t i = 0; i < N_PARAMS; i++) { /* the textbook, from the same replicas */
                double big = fmax(fabs(G[i]), fabs(M[i]));
                for (int r = 0; r < N; r++)
                    big = fmax(big, fabs(P[r][i]));
                S[i] = big;
                double d = 0.0;
                for (int r = 0; r < N; r++)
                    d += G[i] - P[r][i];
                d /= N;
                M[i] = c.mu * M[i] + d;
                G[i] -= c.lr * (d + c.mu * M[i]);
                S[i] = fmax(S[i], fabs(M[i]));
            }
            vkg_test_outer_ref(N, N_PARAMS, P, g, m, c.dt, c.lr, c.mu, VKG_TEST_OUTER_EXACT);
            for (size_t i = 0; i < N_PARAMS; i++) {
                double ulp = ldexp(1.0, ilogb(fmax(S[i], 1e-30)) - 23);
                double e = fabs(g[i] - G[i]) / ulp;
                worst = e > worst ? e : worst;
                G[i] = g[i]; /* from the same point each round: the step's error alone */
                M[i] = m[i];
            }
        }
        printf("%d ranks: the reference within %.2f ulps of the textbook Nesterov step\n", N,
               worst);
        assert_true(worst <= 8.0);
        for (int r = 0; r < N; r++)
            free(P[r]);
        free(g), free(m), free(G), free(M), free(S);
    }
}

/* mean(delta) from int8 and bf16 (momentum 0: the momentum after one step) within the stated
 * bounds of the exact mean, and int8's error reaching half its bound. */
static void test_bounds(void **state)
{
    (void)state;
    for (int N = 2; N <= 3; N++)
        for (int dt = VKG_OUTER_BF16; dt <= VKG_OUTER_INT4; dt++) {
            outer_case c = {.dt = (vkg_outer_dtype)dt, .lr = 0.7f, .mu = 0.0f, .rounds = 1};
            c.g[0] = malloc(N_PARAMS * 4), c.m[0] = malloc(N_PARAMS * 4);
            c.p[0] = malloc(N_PARAMS * 4);
            for (int r = 1; r < MAXR; r++)
                c.g[r] = malloc(N_PARAMS * 4), c.m[r] = malloc(N_PARAMS * 4),
                c.p[r] = malloc(N_PARAMS * 4);
            vkg_th_opts o = {.transport = VKG_COMM_INPROC, .wall_s = 120};
            vkg_th_result res[VKG_TH_MAX_RANKS];
            vkg_th_run(N, &o, rank_body, &c, res);
            for (int r = 0; r < N; r++)
                assert_int_equal(res[r].body_rc, 0);
            float *g = malloc(N_PARAMS * 4), *P[MAXR];
            for (int r = 0; r < N; r++)
                assert_non_null(P[r] = malloc(N_PARAMS * 4));
            initial(g);
            for (int r = 0; r < N; r++)
                replica(g, r, 0, P[r]);
            double worst = 0.0, worst_ratio = 0.0;
            for (size_t i = 0; i < N_PARAMS; i++) {
                double exact = 0.0, bound = 0.0, mag = 0.0;
                for (int r = 0; r < N; r++) {
                    float dr = g[i] - P[r][i]; /* the pseudo-gradient, as each rank forms it */
                    exact += dr;
                    mag += fabs(dr);
                    if (dt == VKG_OUTER_BF16) {
                        bound += ldexp(fabs(dr), -8); /* half an ulp of 8 bits */
                    } else {
                        size_t a = i / VKG_OUTER_INT8_CHUNK * VKG_OUTER_INT8_CHUNK;
                        float amax = 0.0f;
                        for (size_t j = a; j < a + VKG_OUTER_INT8_CHUNK && j < N_PARAMS; j++)
                            amax = fmaxf(amax, fabsf(g[j] - P[r][j]));
                        float qmax = dt == VKG_OUTER_INT8 ? 127.0f : 7.0f;
                        bound += (double)(amax / qmax) * (0.5 + ldexp(1.0, -16));
                    }
                }
                exact /= N, bound /= N;
                bound += ldexp(mag, -23); /* the fp32 sum of N terms and the division */
                double err = fabs((double)c.m[0][i] - exact);
                if (err > bound)
                    fail_msg("%s, %d ranks: element %zu: mean pseudo-gradient %.9g, exact %.9g, "
                             "error %.3g over the bound %.3g",
                             vkg_outer_dtype_name(c.dt), N, i, (double)c.m[0][i], exact, err,
                             bound);
                worst = err > worst ? err : worst;
                if (bound > 1e-30 && err / bound > worst_ratio)
                    worst_ratio = err / bound;
            }
            printf("%s, %d ranks: max error %.3g, at most %.3f of the stated bound\n",
                   vkg_outer_dtype_name(c.dt), N, worst, worst_ratio);
            if (dt != VKG_OUTER_BF16)
                assert_true(worst_ratio > 0.5);
            for (int r = 0; r < MAXR; r++)
                free(c.g[r]), free(c.m[r]), free(c.p[r]);
            for (int r = 0; r < N; r++)
                free(P[r]);
            free(g);
        }
}

/* lr 1, momentum 0: the round lands on the replicas' fp32 mean, bit for bit. */
static void test_average_exact(void **state)
{
    (void)state;
    for (int N = 2; N <= 3; N++) {
        outer_case c = {.dt = VKG_OUTER_F32, .lr = 1.0f, .mu = 0.0f, .rounds = 1};
        for (int r = 0; r < MAXR; r++)
            c.g[r] = malloc(N_PARAMS * 4), c.m[r] = malloc(N_PARAMS * 4),
            c.p[r] = malloc(N_PARAMS * 4);
        vkg_th_opts o = {.transport = VKG_COMM_INPROC, .wall_s = 120};
        vkg_th_result res[VKG_TH_MAX_RANKS];
        vkg_th_run(N, &o, rank_body, &c, res);
        float *g = malloc(N_PARAMS * 4), *P[MAXR];
        for (int r = 0; r < N; r++)
            assert_non_null(P[r] = malloc(N_PARAMS * 4));
        initial(g);
        for (int r = 0; r < N; r++)
            replica(g, r, 0, P[r]);
        int textbook_differs = 0;
        for (size_t i = 0; i < N_PARAMS; i++) {
            float s = P[0][i], d = g[i] - P[0][i];
            for (int r = 1; r < N; r++)
                s = s + P[r][i], d = d + (g[i] - P[r][i]);
            float mean = s / (float)N, textbook = g[i] - d / (float)N;
            for (int r = 0; r < N; r++) {
                assert_int_equal(res[r].body_rc, 0);
                if (memcmp(&c.g[r][i], &mean, 4) || memcmp(&c.p[r][i], &mean, 4))
                    fail_msg("%d ranks: rank %d element %zu: %.9g, the replicas' mean %.9g", N, r,
                             i, (double)c.g[r][i], (double)mean);
            }
            textbook_differs += memcmp(&textbook, &mean, 4) != 0;
        }
        printf("%d ranks: the global parameters are the replicas' mean bit for bit; the textbook "
               "order g - mean(g - theta_r) differs from it in %d of %d elements\n",
               N, textbook_differs, N_PARAMS);
        assert_true(textbook_differs > 0);
        for (int r = 0; r < MAXR; r++)
            free(c.g[r]), free(c.m[r]), free(c.p[r]);
        for (int r = 0; r < N; r++)
            free(P[r]);
        free(g);
    }
}

/* The comparison bites: broken references differ from the good one. */
static void test_checker_bites(void **state)
{
    (void)state;
    float *g = malloc(N_PARAMS * 4), *m = malloc(N_PARAMS * 4), *g2 = malloc(N_PARAMS * 4),
          *m2 = malloc(N_PARAMS * 4);
    assert_true(g && m && g2 && m2);
    outer_case nesterov = {.dt = VKG_OUTER_F32, .lr = 0.7f, .mu = 0.9f, .rounds = ROUNDS};
    ref_run(2, &nesterov, VKG_TEST_OUTER_EXACT, g, m);
    ref_run(2, &nesterov, VKG_TEST_OUTER_HEAVY_BALL, g2, m2);
    assert_true(memcmp(g, g2, N_PARAMS * 4) != 0);
    outer_case int8 = {.dt = VKG_OUTER_INT8, .lr = 0.7f, .mu = 0.9f, .rounds = ROUNDS};
    ref_run(2, &int8, VKG_TEST_OUTER_EXACT, g, m);
    ref_run(2, &int8, VKG_TEST_OUTER_TRUNCATE, g2, m2);
    assert_true(memcmp(g, g2, N_PARAMS * 4) != 0);
    free(g), free(m), free(g2), free(m2);
}

/* Bad settings refused by name. */
static void test_refused(void **state)
{
    (void)state;
    vkg_outer *o = NULL;
    assert_int_equal(vkg_outer_create(8, 0.0f, 0.9f, VKG_OUTER_F32, &o), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "--outer-lr"));
    assert_int_equal(vkg_outer_create(8, 0.7f, 1.0f, VKG_OUTER_F32, &o), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "--outer-momentum"));
    assert_int_equal(vkg_outer_create(8, 0.7f, 0.9f, (vkg_outer_dtype)7, &o), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "--outer-dtype"));
    assert_null(o);
    assert_int_equal(vkg_outer_payload_bytes(N_PARAMS, VKG_OUTER_F32), 4 * N_PARAMS);
    assert_int_equal(vkg_outer_payload_bytes(N_PARAMS, VKG_OUTER_BF16), 2 * N_PARAMS);
    assert_int_equal(vkg_outer_payload_bytes(N_PARAMS, VKG_OUTER_INT8), N_PARAMS + 4 * 79);
    assert_int_equal(vkg_outer_payload_bytes(N_PARAMS, VKG_OUTER_INT4),
                     (N_PARAMS + 1) / 2 + 4 * 79);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_checker_bites),
        cmocka_unit_test(test_reference_is_nesterov),
        cmocka_unit_test(test_fp32),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_int8),
        cmocka_unit_test(test_int4),
#if FORK
        cmocka_unit_test(test_across_hosts),
#endif
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_average_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
