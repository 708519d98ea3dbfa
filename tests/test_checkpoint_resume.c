/* Tests of src/train/checkpoint's resume and lock: resuming stopped by a damaged newest
 * checkpoint marked complete (truncated, wrong header), naming the file and changing nothing,
 * unless falling back, which sets it aside untouched (beside a later checkpoint of its step, and
 * under the next free name when damaged again) and passes over newer interrupted writes; a folder
 * where nothing loads refused even with fallback; the folder's lock refusing a second holder,
 * naming it, and not a dead one. Each test works in its own temporary folder (ckpt_fixture.h).
 * The files themselves, writing and pruning: test_checkpoint.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckpt_fixture.h"
#include "testutil.h"
#include "train/checkpoint.h"

/* The bytes of a checkpoint directory's three files, to check that nothing changed them. */
typedef struct snapshot {
    unsigned char *b[3];
    size_t n[3];
} snapshot;

static const char *const ckpt_files[3] = {"model.bin", "state.bin", "DONE"};

static void take(vkg_ck_fixture *f, const char *rel_dir, snapshot *sn)
{
    char rel[256];
    for (int i = 0; i < 3; i++) {
        snprintf(rel, sizeof rel, "%s/%s", rel_dir, ckpt_files[i]);
        sn->b[i] = vkg_test_must_read(vkg_ck_path(f, rel), &sn->n[i]);
    }
}

/* rel_dir holds exactly the bytes of sn (which is freed). */
static void expect_unchanged(vkg_ck_fixture *f, const char *rel_dir, snapshot *sn)
{
    char rel[256];
    for (int i = 0; i < 3; i++) {
        size_t n;
        snprintf(rel, sizeof rel, "%s/%s", rel_dir, ckpt_files[i]);
        unsigned char *now = vkg_test_must_read(vkg_ck_path(f, rel), &n);
        if (n != sn->n[i] || memcmp(now, sn->b[i], n) != 0)
            fail_msg("%s changed (%zu bytes, was %zu)", f->path, n, sn->n[i]);
        free(now);
        free(sn->b[i]);
    }
}

/* Resume under ck without fallback: refused with VKG_ERR_FORMAT naming file and what, nothing
 * changed. */
static void expect_resume_refused(vkg_ck_fixture *f, const char *file, const char *what)
{
    vkg_checkpoint c;
    char path[512], notes[2048];
    snapshot sn;
    take(f, "ck/step_00000030", &sn);
    assert_int_equal(
        vkg_checkpoint_resume(vkg_ck_path(f, "ck"), 0, &c, path, sizeof path, notes, sizeof notes),
        VKG_ERR_FORMAT);
    printf("refused: %s\n", vkg_error_message());
    assert_null(c.params);
    snprintf(path, sizeof path, "%s/ck/step_00000030/%s", f->dir, file);
    vkg_ck_expect_msg(path, what);
    vkg_ck_expect_msg("marked complete", "nothing was changed");
    expect_unchanged(f, "ck/step_00000030", &sn);
    assert_false(vkg_ck_exists(f, "ck/step_00000030.damaged"));
}

/* Overwrite the 32-bit header slot `slot` of a file in place. */
static void poke_header(const char *path, int slot, int32_t value)
{
    size_t n;
    unsigned char *b = vkg_test_must_read(path, &n);
    memcpy(b + 4 * slot, &value, 4);
    vkg_ck_spit(path, b, n);
    free(b);
}

/* Resuming never passes over a damaged checkpoint marked complete unless asked to: truncation and
 * wrong headers stop it like a flipped bit, naming the file; with fallback the damaged one is set
 * aside untouched and a later checkpoint of its step is written beside it. */
static void test_resume_damaged(void **state)
{
    vkg_ck_fixture *f = *state;
    vkg_checkpoint c;
    char path[512], notes[2048];
    assert_int_equal(
        vkg_checkpoint_resume(vkg_ck_path(f, "ck"), 0, &c, path, sizeof path, notes, sizeof notes),
        VKG_ERR_NOT_FOUND); /* no folder: a new run */
    vkg_ck_write(f, 10);
    vkg_ck_write(f, 20);
    vkg_ck_write(f, 30);
    assert_int_equal(
        vkg_checkpoint_resume(vkg_ck_path(f, "ck"), 0, &c, path, sizeof path, notes, sizeof notes),
        VKG_OK);
    assert_string_equal(path, vkg_ck_path(f, "ck/step_00000030"));
    assert_true(c.state.step == 30);
    assert_string_equal(notes, "");
    vkg_checkpoint_deinit(&c);

    size_t n_model = 1024 + 4 * f->n, n_state = 1024 + 8 * f->n + 4;
    /* truncated model.bin, truncated state.bin */
    assert_int_equal(truncate(vkg_ck_path(f, "ck/step_00000030/model.bin"), (off_t)n_model - 4), 0);
    expect_resume_refused(f, "model.bin", "truncated");
    assert_int_equal(truncate(vkg_ck_path(f, "ck/step_00000030/model.bin"), (off_t)n_model), 0);
    assert_int_equal(truncate(vkg_ck_path(f, "ck/step_00000030/state.bin"), (off_t)n_state - 100),
                     0);
    expect_resume_refused(f, "state.bin", "truncated");
    assert_int_equal(unlink(vkg_ck_path(f, "ck/step_00000030/DONE")), 0);
    assert_int_equal(unlink(vkg_ck_path(f, "ck/step_00000030/state.bin")), 0);
    assert_int_equal(unlink(vkg_ck_path(f, "ck/step_00000030/model.bin")), 0);
    vkg_ck_write(f, 30); /* no DONE: written over */
    /* a wrong header field: model.bin's heads (same size, same parameters), state.bin's magic */
    poke_header(vkg_ck_path(f, "ck/step_00000030/model.bin"), 5, 1);
    expect_resume_refused(f, "state.bin", "does not match");
    vkg_ck_expect_msg("model.bin", "NH=1");
    poke_header(vkg_ck_path(f, "ck/step_00000030/model.bin"), 5, f->cfg.num_heads);
    poke_header(vkg_ck_path(f, "ck/step_00000030/state.bin"), 0, 1234);
    expect_resume_refused(f, "state.bin", "bad magic");

    /* With fallback: step 20, and step 30 set aside, untouched. A newer interrupted write (no
     * DONE) is passed over and left where it is. */
    vkg_ck_write(f, 40);
    assert_int_equal(unlink(vkg_ck_path(f, "ck/step_00000040/DONE")), 0);
    snapshot sn;
    take(f, "ck/step_00000030", &sn);
    assert_int_equal(
        vkg_checkpoint_resume(vkg_ck_path(f, "ck"), 1, &c, path, sizeof path, notes, sizeof notes),
        VKG_OK);
    printf("fallback notes: %s\n", notes);
    assert_string_equal(path, vkg_ck_path(f, "ck/step_00000020"));
    assert_true(c.state.step == 20);
    assert_memory_equal(c.params, f->params, f->n * sizeof(float));
    vkg_checkpoint_deinit(&c);
    assert_non_null(strstr(notes, "step_00000040 (no DONE"));
    assert_non_null(strstr(notes, "step_00000030 (does not load: "));
    assert_non_null(strstr(notes, "bad magic"));
    assert_non_null(strstr(notes, "set aside untouched as step_00000030.damaged"));
    assert_false(vkg_ck_exists(f, "ck/step_00000030"));
    assert_true(vkg_ck_exists(f, "ck/step_00000040/model.bin"));
    expect_unchanged(f, "ck/step_00000030.damaged", &sn);
    /* the run goes on: step 30 is written anew beside it; pruning and resuming leave it alone */
    take(f, "ck/step_00000030.damaged", &sn);
    vkg_ck_write(f, 30);
    int removed = 0;
    assert_int_equal(vkg_checkpoint_prune(vkg_ck_path(f, "ck"), 1, 30, &removed), VKG_OK);
    assert_int_equal(removed, 2); /* steps 10 and 20 */
    assert_int_equal(
        vkg_checkpoint_resume(vkg_ck_path(f, "ck"), 1, &c, path, sizeof path, notes, sizeof notes),
        VKG_OK);
    assert_string_equal(path, vkg_ck_path(f, "ck/step_00000030"));
    vkg_checkpoint_deinit(&c);
    expect_unchanged(f, "ck/step_00000030.damaged", &sn);
    /* damaged again: the next free name */
    assert_int_equal(truncate(vkg_ck_path(f, "ck/step_00000030/model.bin"), 100), 0);
    vkg_ck_write(f, 25);
    assert_int_equal(
        vkg_checkpoint_resume(vkg_ck_path(f, "ck"), 1, &c, path, sizeof path, notes, sizeof notes),
        VKG_OK);
    assert_string_equal(path, vkg_ck_path(f, "ck/step_00000025"));
    vkg_checkpoint_deinit(&c);
    assert_true(vkg_ck_exists(f, "ck/step_00000030.damaged.2/DONE"));
    assert_true(vkg_ck_exists(f, "ck/step_00000030.damaged/DONE"));
    /* nothing loads: refused even with fallback, nothing renamed */
    assert_int_equal(truncate(vkg_ck_path(f, "ck/step_00000025/state.bin"), 100), 0);
    assert_int_equal(
        vkg_checkpoint_resume(vkg_ck_path(f, "ck"), 1, &c, path, sizeof path, notes, sizeof notes),
        VKG_ERR_FORMAT);
    printf("none loads: %s\n", vkg_error_message());
    vkg_ck_expect_msg("none of its 1 checkpoints marked complete loads", "step_00000025");
    assert_true(vkg_ck_exists(f, "ck/step_00000025/DONE"));
    /* a directory holding another step's checkpoint does not load either */
    char from[512];
    snprintf(from, sizeof from, "%s", vkg_ck_path(f, "ck/step_00000025"));
    assert_int_equal(rename(from, vkg_ck_path(f, "ck/step_00000099.bad")), 0);
    vkg_ck_write(f, 50);
    snprintf(from, sizeof from, "%s", vkg_ck_path(f, "ck/step_00000050"));
    assert_int_equal(rename(from, vkg_ck_path(f, "ck/step_00000060")), 0);
    assert_int_equal(
        vkg_checkpoint_resume(vkg_ck_path(f, "ck"), 0, &c, path, sizeof path, notes, sizeof notes),
        VKG_ERR_FORMAT);
    vkg_ck_expect_msg("step_00000060/state.bin", "holds step 50");
}

/* One process at a time holds a checkpoint folder; the second is told who holds it; a holder
 * that died (even by SIGKILL) leaves a file that blocks nobody. */
static void test_lock(void **state)
{
    vkg_ck_fixture *f = *state;
    char host[64] = "", want[160];
    gethostname(host, sizeof host - 1);
    struct vkg_os_lockfile *fd = NULL, *fd2 = NULL;
    assert_int_equal(vkg_checkpoint_lock(f->dir, &fd), VKG_OK);
    assert_non_null(fd);
    size_t n;
    unsigned char *text = vkg_test_must_read(vkg_ck_path(f, VKG_CHECKPOINT_LOCK_NAME), &n);
    snprintf(want, sizeof want, "pid %ld host %s\n", (long)getpid(), host);
    assert_true(n == strlen(want) && memcmp(text, want, n) == 0);
    free(text);
    /* a second claim (another open file description, as another process has) is refused */
    assert_int_equal(vkg_checkpoint_lock(f->dir, &fd2), VKG_ERR_STATE);
    assert_null(fd2);
    printf("refused: %s\n", vkg_error_message());
    snprintf(want, sizeof want, "pid %ld on host %s", (long)getpid(), host);
    vkg_ck_expect_msg(want, f->dir);
    vkg_ck_expect_msg("in use by another trainer", VKG_CHECKPOINT_LOCK_NAME);
    vkg_checkpoint_unlock(&fd);
    assert_null(fd);
    assert_int_equal(vkg_checkpoint_lock(f->dir, &fd2), VKG_OK);
    vkg_checkpoint_unlock(&fd2);

    /* another process holds it, then is killed: refused while it lives, free after */
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        struct vkg_os_lockfile *cfd;
        char ok = vkg_checkpoint_lock(f->dir, &cfd) == VKG_OK ? 'y' : 'n';
        if (write(ready[1], &ok, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char ok = 0;
    assert_int_equal(read(ready[0], &ok, 1), 1);
    assert_int_equal(ok, 'y');
    assert_int_equal(vkg_checkpoint_lock(f->dir, &fd), VKG_ERR_STATE);
    snprintf(want, sizeof want, "pid %ld on host %s", (long)child, host);
    vkg_ck_expect_msg(want, NULL);
    assert_int_equal(kill(child, SIGKILL), 0);
    assert_int_equal(waitpid(child, NULL, 0), child);
    close(ready[0]), close(ready[1]);
    text = vkg_test_must_read(vkg_ck_path(f, VKG_CHECKPOINT_LOCK_NAME),
                              &n); /* the dead holder's text is still there */
    snprintf(want, sizeof want, "pid %ld host", (long)child);
    assert_true(n > strlen(want) && memcmp(text, want, strlen(want)) == 0);
    free(text);
    assert_int_equal(vkg_checkpoint_lock(f->dir, &fd), VKG_OK);
    text = vkg_test_must_read(vkg_ck_path(f, VKG_CHECKPOINT_LOCK_NAME), &n);
    snprintf(want, sizeof want, "pid %ld host %s\n", (long)getpid(), host);
    assert_true(n == strlen(want) && memcmp(text, want, n) == 0);
    free(text);
    vkg_checkpoint_unlock(&fd);
    /* a folder that does not exist cannot be locked: an I/O error naming the file */
    assert_int_equal(vkg_checkpoint_lock(vkg_ck_path(f, "none"), &fd), VKG_ERR_IO);
    vkg_ck_expect_msg("none/" VKG_CHECKPOINT_LOCK_NAME, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_resume_damaged, vkg_ck_setup, vkg_ck_teardown),
        cmocka_unit_test_setup_teardown(test_lock, vkg_ck_setup, vkg_ck_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
