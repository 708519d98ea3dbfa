/* The shader index limit (src/ops/op_util.h) where it cannot be met: an op whose single row (or
 * attention batch, wpe sequence, or the encoder's token ids) exceeds a lowered limit is refused
 * naming the op and the sizes, recording nothing; and VKG_MAX_DISPATCH_ELEMS, read once per
 * process, is probed in child processes of this program: a valid value splits a fill, an invalid
 * one is a clear error from the first op (and the next) naming the variable and the value.
 * Ops split below the limit, bitwise as unsplit: test_dispatch_split.c,
 * test_dispatch_split_matmul.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_fixture.h"
#include "ops/op_util.h"
#include "ops/ops.h"
#include "testutil.h"

/* ---- refusals ---------------------------------------------------------------------------- */

/* Record `call` under the limit `lim` and expect it refused with a message containing `needle`. */
#define EXPECT_REFUSED(lim, call, needle)                                                          \
    do {                                                                                           \
        vkg__op_set_max_elems(lim);                                                                \
        vkg_status refused_st_ = (call);                                                           \
        vkg__op_set_max_elems(0);                                                                  \
        vkg_expect_invalid(refused_st_, needle);                                                   \
    } while (0)

/* One row beyond the limit cannot be split: a clear error naming the op and the sizes, and
 * nothing recorded. */
static void test_row_beyond_the_limit(void **state)
{
    vkg_gpu *g = *state;
    vkg_cmd *c = g->cmd;
    vkg_tensor big = vkg_gpu_poisoned(g, 20000), ids = vkg_gpu_upload(g, NULL, 400 * 4);
    EXPECT_REFUSED(30, vkg_op_layernorm_fwd(c, big, big, big, big, big, big, 4, 37),
                   "layernorm_fwd: one row of C=37 elements is more than the 30 one shader "
                   "dispatch may index");
    EXPECT_REFUSED(30, vkg_op_layernorm_bwd(c, big, big, big, big, big, big, big, big, 4, 37),
                   "layernorm_bwd: one row of C=37");
    EXPECT_REFUSED(30, vkg_op_xent_fwd_bwd(c, big, NULL, big, ids, 4, 20, 32, 1.0f),
                   "xent_fwd_bwd: one row of logits (Vp=32) is more than the 30");
    EXPECT_REFUSED(100, vkg_op_attention_fwd(c, big, big, big, 2, 11, 6, 3),
                   "attention_fwd: one batch needs T*3C = 198 elements of qkv (T=11 C=6), more "
                   "than the 100");
    EXPECT_REFUSED(100, vkg_op_attention_bwd(c, big, big, big, big, big, 2, 11, 6, 3, big),
                   "attention_bwd: one batch needs T*3C = 198");
    EXPECT_REFUSED(100, vkg_op_matmul_fwd(c, big, big, big, NULL, 8, 20, 101, big),
                   "matmul_fwd: one row of C=20 or OC=101 elements is more than the 100");
    EXPECT_REFUSED(100, vkg_op_matmul_bwd_dinp(c, big, big, big, 8, 101, 20),
                   "matmul_bwd_dinp: one row of C=101 or OC=20");
    EXPECT_REFUSED(
        100, vkg_op_matmul_bwd_dweight(c, big, NULL, big, big, 8, 101, 20, NULL),
        "matmul_bwd_dweight: a row of 101 elements (M=20 N=101 K=8) is more than the 100");
    EXPECT_REFUSED(100, vkg_op_transpose(c, big, big, 101, 20),
                   "transpose: a row of rows=101 or cols=20 elements is more than the 100");
    EXPECT_REFUSED(100, vkg_op_encoder_fwd(c, big, ids, big, big, 2, 4, 101),
                   "encoder_fwd: one row of C=101 elements is more than the 100");
    EXPECT_REFUSED(100, vkg_op_encoder_bwd_wpe(c, big, big, 2, 11, 10),
                   "encoder_bwd_wpe: one sequence of T*C = 110 elements (dwpe) is more than the "
                   "100");
    EXPECT_REFUSED(100, vkg_op_encoder_bwd(c, big, big, big, ids, 101, 1, 1),
                   "encoder_bwd: the B*T = 101 token ids are more than the 100");
    assert_int_equal(vkg_cmd_dispatch_count(c), 0);
    vkg_gpu_run(g);
}

/* ---- VKG_MAX_DISPATCH_ELEMS -------------------------------------------------------------- */

/* Child mode (--env-probe): open the device, record fills of 5000 elements twice and print
 * "dispatches D" or "error STATUS: MESSAGE" for each; exit 0. */
static int env_probe(void)
{
    vkg_device_opts opts = vkg_device_opts_default();
    opts.select = getenv("VKGPT_DEVICE");
    vkg_device_t *dev = NULL;
    vkg_arena *arena = NULL;
    vkg_cmd *c = NULL;
    vkg_tensor x;
    if (vkg_device_create(&opts, &dev) || vkg_arena_create(dev, 5000 * 4 + 256, "probe", &arena) ||
        vkg_arena_alloc(arena, 5000 * 4, &x) || vkg_cmd_create(dev, &c) || vkg_cmd_begin(c)) {
        printf("setup failed: %s\n", vkg_error_message());
        return 1;
    }
    for (int i = 0; i < 2; i++) {
        int before = vkg_cmd_dispatch_count(c);
        vkg_status st = vkg_op_fill(c, x, 5000, 1.0f);
        if (st == VKG_OK)
            printf("dispatches %d\n", vkg_cmd_dispatch_count(c) - before);
        else
            printf("error %s: %s\n", vkg_status_name(st), vkg_error_message());
    }
    vkg_cmd_end(c);
    vkg_cmd_destroy(&c);
    vkg_arena_destroy(&arena);
    vkg_device_destroy(&dev);
    return 0;
}

static char self_path[1024];

/* Run this program in probe mode with VKG_MAX_DISPATCH_ELEMS set to value (NULL: unset); its
 * output. */
static char *probe(const char *value)
{
    char cmd[1400];
    if (value)
        snprintf(cmd, sizeof cmd, "VKG_MAX_DISPATCH_ELEMS='%s' '%s' --env-probe 2>&1", value,
                 self_path);
    else
        snprintf(cmd, sizeof cmd, "env -u VKG_MAX_DISPATCH_ELEMS '%s' --env-probe 2>&1", self_path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *out = calloc(1, 4096);
    assert_non_null(out);
    size_t n = fread(out, 1, 4095, p);
    out[n] = '\0';
    int rc = pclose(p);
    print_message("    VKG_MAX_DISPATCH_ELEMS=%s:\n%s", value ? value : "(unset)", out);
    assert_int_equal(rc, 0);
    return out;
}

static void test_limit_from_the_environment(void **state)
{
    (void)state;
    char *out = probe(NULL);
    assert_non_null(strstr(out, "dispatches 1\ndispatches 1\n"));
    free(out);
    out = probe("1000"); /* 5 chunks of 1000 */
    assert_non_null(strstr(out, "dispatches 5\ndispatches 5\n"));
    free(out);
    out = probe("2147483647");
    assert_non_null(strstr(out, "dispatches 1\n"));
    free(out);
    const char *bad[] = {"12abc", "0", "-5", "", " 100", "2147483648", "1e6"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        out = probe(bad[i]);
        char want[128];
        snprintf(want, sizeof want, "fill: VKG_MAX_DISPATCH_ELEMS=\"%s\" is not a positive integer",
                 bad[i]);
        /* the same error from the first op and the next: the value is read once */
        const char *first = strstr(out, want);
        if (!first || !strstr(first + 1, want) || !strstr(out, "error VKG_ERR_INVALID_ARG"))
            fail_msg("VKG_MAX_DISPATCH_ELEMS=\"%s\": expected twice \"%s\", got:\n%s", bad[i], want,
                     out);
        free(out);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--env-probe"))
        return env_probe();
    ssize_t len = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (len <= 0)
        return 1;
    self_path[len] = '\0';
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_row_beyond_the_limit, vkg_gpu_setup, vkg_gpu_teardown),
        cmocka_unit_test(test_limit_from_the_environment),
    };
    return cmocka_run_group_tests(tests, vkg_gpu_group_setup, vkg_gpu_group_teardown);
}
