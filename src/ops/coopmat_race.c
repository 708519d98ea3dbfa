/* --coopmat auto's second question after the self-check: is the cooperative-matrix kernel faster
 * than the kernel the device runs otherwise? One GPT-2 fc-shaped forward product with bf16
 * operands and a bf16 output (M x 768 by 3072 x 768, as in --precision bf16's MLP) is timed on
 * both, and the kernel is kept only where it wins by at least 10 %. A device whose tensor-core
 * kernel is slower (as measured on an H200: 8.7 TFLOP/s against the tiled kernel's 29.6) then
 * trains on the faster one instead of on the one it happens to list. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "os/clock.h"
#include "ops/ops.h"

enum { RACE_K = 768, RACE_N = 3072, RACE_RUNS = 3 };

/* The kernel must be at least 10 % faster: near a tie the choice would follow timing noise,
 * and the two kernels round differently (f16 operands), so runs would differ in their bits. */
#define RACE_MARGIN 0.9

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Record the product into cmd (under dev's current tuning) and time it: one untimed run (the
 * pipeline built), then the median of RACE_RUNS wall-clock runs into *ms. */
static vkg_status time_product(vkg_cmd *cmd, const vkg_tensor t[4], uint32_t M, double *ms)
{
    double runs[RACE_RUNS];
    VKG_TRY(vkg_cmd_begin(cmd));
    VKG_TRY(vkg_op_matmul_fwd(cmd, t[2], t[0], t[1], NULL, M, RACE_K, RACE_N, t[3]));
    VKG_TRY(vkg_cmd_end(cmd));
    VKG_TRY(vkg_cmd_run(cmd, 0));
    for (int i = 0; i < RACE_RUNS; i++) {
        double t0 = vkg_os_now_ms();
        VKG_TRY(vkg_cmd_run(cmd, 0));
        runs[i] = vkg_os_now_ms() - t0;
    }
    qsort(runs, RACE_RUNS, sizeof runs[0], cmp_double);
    *ms = runs[RACE_RUNS / 2];
    return VKG_OK;
}

vkg_status vkg_op_coopmat_race(vkg_device_t *dev, uint32_t M, char *why, size_t cap, double ms[2])
{
    if (cap)
        why[0] = '\0';
    ms[0] = ms[1] = 0.0;
    vkg_device_tuning on = vkg_device_tuning_get(dev), off = on;
    if (!on.coopmat)
        return VKG_OK;
    VKG_CHECK(M > 0, VKG_ERR_INVALID_ARG, "coopmat race: M must be positive");
    off.coopmat = 0;
    size_t n[4] = {(size_t)M * RACE_K, (size_t)RACE_N * RACE_K, (size_t)M * RACE_N,
                   (size_t)M * RACE_K};
    size_t bytes[4] = {n[0] * 2, n[1] * 2, n[2] * 2, n[3] * 4}, total = 0;
    for (int i = 0; i < 4; i++)
        total += (bytes[i] + 255) / 256 * 256 + 256;
    vkg_arena *arena = NULL;
    vkg_cmd *cmd = NULL;
    uint16_t *ones = NULL;
    vkg_tensor t[4]; /* a (M x K), b (N x K), out (M x N), scratch */
    vkg_status st = VKG_OK;
    VKG_TRY_GOTO(st, vkg_arena_create(dev, total, "coopmat race", &arena), done);
    for (int i = 0; i < 4; i++)
        VKG_TRY_GOTO(st, vkg_arena_alloc(arena, bytes[i], &t[i]), done);
    t[0].dtype = t[1].dtype = t[2].dtype = VKG_BF16;
    /* operands of 1.0 (bf16 0x3F80): in f16's normal range, as GPT-2's activations and weights
     * are, so that the kernel's staging takes the path it takes in training */
    size_t most = n[0] > n[1] ? n[0] : n[1];
    ones = malloc(most * sizeof *ones);
    VKG_CHECK_GOTO(st, ones, VKG_ERR_NOMEM, done, "coopmat race: no memory for %zu operands", most);
    for (size_t i = 0; i < most; i++)
        ones[i] = 0x3F80;
    VKG_TRY_GOTO(st, vkg_tensor_write(dev, t[0], 0, ones, bytes[0]), done);
    VKG_TRY_GOTO(st, vkg_tensor_write(dev, t[1], 0, ones, bytes[1]), done);
    VKG_TRY_GOTO(st, vkg_cmd_create(dev, &cmd), done);
    VKG_TRY_GOTO(st, time_product(cmd, t, M, &ms[0]), done);
    VKG_TRY_GOTO(st, vkg_device_tuning_set(dev, &off), done);
    VKG_TRY_GOTO(st, time_product(cmd, t, M, &ms[1]), done);
    if (ms[0] < RACE_MARGIN * ms[1]) {
        VKG_TRY_GOTO(st, vkg_device_tuning_set(dev, &on), done);
    } else {
        snprintf(why, cap,
                 "the cooperative-matrix kernel took %.3f ms for a %ux%ux%u bf16 product, the "
                 "other kernel %.3f ms",
                 ms[0], M, RACE_N, RACE_K, ms[1]);
    }
done:
    if (st != VKG_OK) /* whatever failed, the tuning is the one the caller had */
        vkg_device_tuning_set(dev, &on);
    vkg_cmd_destroy(&cmd);
    vkg_arena_destroy(&arena);
    free(ones);
    return st;
}
