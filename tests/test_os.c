/* The platform layer (src/os) as every caller sees it, whatever the system:
 *  - vkg_os_glob: a pattern's matches sorted by name, a literal path that exists is its one
 *    match, no match and a missing folder are VKG_OS_GLOB_NOMATCH with nothing to free, a
 *    pattern with a wildcard only in its last component expands there;
 *  - vkg_os_glob_has_wildcard;
 *  - vkg_os_now_ms never goes back, and vkg_os_sleep_ms(30) lasts at least 30 ms by it;
 *  - files: mkdir (new, existing, a file in the way, a missing parent), replace over a file,
 *    flush to disk, the advisory lock (a second taker gets EBUSY and the holder's text; free
 *    again once released), pid and host name; reading (regular files only, read and pread),
 *    folder listings sorted by name, rmdir; a new file written once (EEXIST the second time);
 *  - the host: aligned memory, the kernel's identity ("" or "boot=..."), the Vulkan loader's name;
 *  - paths: the separators ('/', and '\\' on Windows alone), the temporary folder (a folder, no
 *    trailing separator; on POSIX $TMPDIR when set and not empty, else /tmp), ipc:// where the
 *    system has Unix-domain sockets (POSIX, not Windows);
 *  - sockets: names resolved to numeric addresses, the route to the loopback address, a free
 *    port; the wake-up: drained after signals (merged), signalled again after a drain. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os/clock.h"
#include "os/file.h"
#include "os/glob.h"
#include "os/host.h"
#include "os/net.h"
#include "os/proc.h"

static char dir[64];

static void touch(const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/vkg_test_os_XXXXXX");
    if (vkg_os_mkdtemp(dir) != 0)
        return -1;
    /* created out of name order, so that the sorting shows */
    const char *names[] = {"b_000001.bin", "a_000002.bin", "a_000001.bin", "notes.txt"};
    for (size_t i = 0; i < 4; i++)
        touch(names[i]);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    const char *names[] = {"b_000001.bin", "a_000002.bin", "a_000001.bin", "notes.txt"};
    char path[128];
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        remove(path);
    }
    return rmdir(dir);
}

static void expect_matches(const char *pattern_tail, const char *const *want, size_t n)
{
    char pattern[128], path[128];
    snprintf(pattern, sizeof pattern, "%s/%s", dir, pattern_tail);
    vkg_os_paths g;
    assert_int_equal(vkg_os_glob(pattern, &g), VKG_OS_GLOB_OK);
    assert_int_equal(g.n, n);
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, want[i]);
        assert_string_equal(g.v[i], path);
    }
    vkg_os_paths_free(&g);
    assert_null(g.v);
    assert_int_equal(g.n, 0);
}

static void test_glob(void **state)
{
    (void)state;
    const char *const bins[] = {"a_000001.bin", "a_000002.bin", "b_000001.bin"};
    expect_matches("*.bin", bins, 3);
    expect_matches("a_*.bin", bins, 2);
    expect_matches("?_000001.bin", (const char *const[]){"a_000001.bin", "b_000001.bin"}, 2);
    expect_matches("notes.txt", (const char *const[]){"notes.txt"}, 1);

    char pattern[128];
    vkg_os_paths g = {(char **)1, 7}; /* zeroed on every outcome */
    snprintf(pattern, sizeof pattern, "%s/*.json", dir);
    assert_int_equal(vkg_os_glob(pattern, &g), VKG_OS_GLOB_NOMATCH);
    assert_null(g.v);
    assert_int_equal(g.n, 0);
    snprintf(pattern, sizeof pattern, "%s/missing.bin", dir);
    assert_int_equal(vkg_os_glob(pattern, &g), VKG_OS_GLOB_NOMATCH);
    snprintf(pattern, sizeof pattern, "%s/no_such_folder/*.bin", dir);
    assert_int_equal(vkg_os_glob(pattern, &g), VKG_OS_GLOB_NOMATCH);
    vkg_os_paths_free(&g);
    vkg_os_paths_free(NULL);
}

static void test_wildcard(void **state)
{
    (void)state;
    assert_true(vkg_os_glob_has_wildcard("data/train_*.bin"));
    assert_true(vkg_os_glob_has_wildcard("a?.bin"));
    assert_false(vkg_os_glob_has_wildcard("data/train_000000.bin"));
}

static void test_clock(void **state)
{
    (void)state;
    double t0 = vkg_os_now_ms(), prev = t0;
    for (int i = 0; i < 1000; i++) {
        double t = vkg_os_now_ms();
        assert_true(t >= prev);
        prev = t;
    }
    vkg_os_sleep_ms(30);
    double slept = vkg_os_now_ms() - prev;
    assert_true(slept >= 29.9);
    assert_true(slept < 30000.0); /* a clock in milliseconds, not in microseconds */
}

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

static void test_files(void **state)
{
    (void)state;
    char sub[128], nested[160], a[160], b[160];
    path_of(sub, sizeof sub, "sub");
    assert_int_equal(vkg_os_mkdir(sub), 0);
    assert_int_equal(vkg_os_mkdir(sub), 0); /* an existing folder is fine */
    path_of(a, sizeof a, "notes.txt");
    assert_int_equal(vkg_os_mkdir(a), EEXIST); /* a file in the way */
    snprintf(nested, sizeof nested, "%s/missing/deeper", sub);
    assert_int_equal(vkg_os_mkdir(nested), ENOENT);

    snprintf(a, sizeof a, "%s/new.tmp", sub);
    snprintf(b, sizeof b, "%s/old.txt", sub);
    FILE *f = fopen(b, "w");
    assert_non_null(f);
    fputs("old", f);
    fclose(f);
    f = fopen(a, "w");
    assert_non_null(f);
    fputs("new contents", f);
    assert_int_equal(vkg_os_flush_to_disk(f), 0);
    fclose(f);
    assert_int_equal(vkg_os_replace(a, b), 0);
    char got[32] = "";
    f = fopen(b, "r");
    assert_non_null(f);
    assert_non_null(fgets(got, sizeof got, f));
    fclose(f);
    assert_string_equal(got, "new contents");
    assert_null(fopen(a, "r"));
    assert_int_equal(vkg_os_sync_dir(sub), 0);
    assert_int_equal(remove(b), 0);
    assert_int_equal(vkg_os_rmdir(sub), 0);

    assert_true(vkg_os_pid() > 0);
    char host[64];
    vkg_os_hostname(host, sizeof host);
    assert_true(host[0] != '\0');
}

static void test_write_new(void **state)
{
    (void)state;
    char path[128], got[32] = "";
    path_of(path, sizeof path, "new.key");
    assert_int_equal(vkg_os_write_new(path, 1, "secret\n", 7), 0);
    assert_int_equal(vkg_os_write_new(path, 1, "other\n", 6), EEXIST);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(got, sizeof got, f));
    fclose(f);
    assert_string_equal(got, "secret\n");
    assert_int_equal(remove(path), 0);
}

static void test_host(void **state)
{
    (void)state;
    void *p = vkg_os_aligned_alloc(4096, 10000);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 4096, 0);
    memset(p, 1, 10000);
    vkg_os_aligned_free(p);
    vkg_os_aligned_free(NULL);
    char id[160];
    vkg_os_kernel_identity(id, sizeof id);
    assert_true(id[0] == '\0' || strncmp(id, "boot=", 5) == 0);
}

static void test_paths(void **state)
{
    (void)state;
    int windows = vkg_os_is_path_sep('\\');
    assert_true(vkg_os_is_path_sep('/'));
    assert_false(vkg_os_is_path_sep(':'));
    assert_false(vkg_os_is_path_sep('a'));
    assert_int_equal(vkg_os_has_ipc(), !windows);
    assert_non_null(strstr(vkg_os_vulkan_loader_name(), "vulkan"));
    assert_true(vkg_os_vulkan_loader_hint()[0] != '\0');

    char tmp[512];
    vkg_os_temp_dir(tmp, sizeof tmp);
    size_t n = strlen(tmp);
    assert_true(n > 0);
    assert_true(vkg_os_is_dir(tmp));
    assert_true(n == 1 || !vkg_os_is_path_sep(tmp[n - 1]) || tmp[n - 2] == ':');
    if (windows)
        return;
    char old[512];
    snprintf(old, sizeof old, "%s", getenv("TMPDIR") ? getenv("TMPDIR") : "");
    assert_int_equal(vkg_os_setenv("TMPDIR", "/some/where//", 1), 0);
    vkg_os_temp_dir(tmp, sizeof tmp);
    assert_string_equal(tmp, "/some/where");
    assert_int_equal(vkg_os_setenv("TMPDIR", "", 1), 0);
    vkg_os_temp_dir(tmp, sizeof tmp);
    assert_string_equal(tmp, "/tmp");
    assert_int_equal(vkg_os_setenv("TMPDIR", old, 1), 0);
}

static void test_sockets(void **state)
{
    (void)state;
    char ip[64], why[160];
    assert_int_equal(vkg_os_resolve_numeric("127.0.0.1", ip, sizeof ip, why, sizeof why), 0);
    assert_string_equal(ip, "127.0.0.1");
    assert_int_equal(vkg_os_route_source("127.0.0.1", 9, ip, sizeof ip, why, sizeof why), 0);
    assert_string_equal(ip, "127.0.0.1");
    assert_int_not_equal(
        vkg_os_resolve_numeric("no-such-host.invalid", ip, sizeof ip, why, sizeof why), 0);
    assert_true(why[0] != '\0');
    int port = 0;
    assert_int_equal(vkg_os_free_port("127.0.0.1", &port, why, sizeof why), 0);
    assert_true(port > 0 && port < 65536);

    vkg_os_wake *w = NULL;
    assert_int_equal(vkg_os_wake_create(&w, why, sizeof why), 0);
    vkg_os_wake_drain(w); /* nothing pending: returns at once */
    vkg_os_wake_signal(w);
    vkg_os_wake_signal(w);
    vkg_os_wake_drain(w);
    vkg_os_wake_signal(w);
    vkg_os_wake_drain(w);
    vkg_os_wake_destroy(&w);
    assert_null(w);
    vkg_os_wake_destroy(&w);
}

static void test_lockfile(void **state)
{
    (void)state;
    char path[128], text[64];
    path_of(path, sizeof path, "held.lock");
    vkg_os_lockfile *l = NULL, *l2 = (vkg_os_lockfile *)1;
    assert_int_equal(vkg_os_lockfile_take(path, &l, text, sizeof text), 0);
    assert_non_null(l);
    assert_int_equal(vkg_os_lockfile_write(l, "pid 1 host here\n"), 0);
    assert_int_equal(vkg_os_lockfile_take(path, &l2, text, sizeof text), EBUSY);
    assert_null(l2);
    assert_string_equal(text, "pid 1 host here\n");
    vkg_os_lockfile_release(&l);
    assert_null(l);
    vkg_os_lockfile_release(&l); /* NULL-safe */
    assert_int_equal(vkg_os_lockfile_take(path, &l2, NULL, 0), 0);
    vkg_os_lockfile_release(&l2);
    assert_int_equal(remove(path), 0);
    path_of(path, sizeof path, "no_such_folder/x.lock");
    assert_int_equal(vkg_os_lockfile_take(path, &l, text, sizeof text), ENOENT);
    assert_null(l);
}

static void test_reading(void **state)
{
    (void)state;
    char path[128], sub[128], buf[16];
    path_of(path, sizeof path, "data.bin");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("0123456789", f);
    fclose(f);
    int fd = -1;
    unsigned long long size = 0;
    const char *kind = "x";
    assert_int_equal(vkg_os_open_read(path, &fd, &size, &kind), 0);
    assert_true(fd >= 0);
    assert_null(kind);
    assert_int_equal(size, 10);
    assert_int_equal(vkg_os_pread(fd, buf, 4, 6), 4); /* at an offset, position untouched */
    assert_memory_equal(buf, "6789", 4);
    assert_int_equal(vkg_os_read(fd, buf, 3), 3);
    assert_memory_equal(buf, "012", 3);
    assert_int_equal(vkg_os_pread(fd, buf, 4, 10), 0); /* at the end */
    vkg_os_close(fd);
    assert_true(vkg_os_is_file(path));
    assert_false(vkg_os_is_dir(path));

    assert_true(vkg_os_is_dir(dir));
    assert_false(vkg_os_is_file(dir));
    assert_int_equal(vkg_os_open_read(dir, &fd, &size, &kind), EINVAL);
    assert_string_equal(kind, "a directory");
    assert_int_equal(fd, -1);
    path_of(sub, sizeof sub, "absent.bin");
    assert_int_equal(vkg_os_open_read(sub, &fd, &size, &kind), ENOENT);
    assert_null(kind);
    assert_false(vkg_os_is_file(sub) || vkg_os_is_dir(sub));

    vkg_os_paths names;
    assert_int_equal(vkg_os_list_dir(dir, &names), 0);
    const char *const want[] = {"a_000001.bin", "a_000002.bin", "b_000001.bin", "data.bin",
                                "notes.txt"};
    assert_int_equal(names.n, 5);
    for (size_t i = 0; i < 5; i++)
        assert_string_equal(names.v[i], want[i]);
    vkg_os_paths_free(&names);
    assert_int_equal(remove(path), 0);
    path_of(sub, sizeof sub, "empty");
    assert_int_equal(vkg_os_mkdir(sub), 0);
    assert_int_equal(vkg_os_list_dir(sub, &names), 0);
    assert_int_equal(names.n, 0);
    vkg_os_paths_free(&names);
    assert_int_equal(vkg_os_rmdir(sub), 0);
    assert_int_equal(vkg_os_list_dir(sub, &names), ENOENT);
    assert_int_equal(vkg_os_rmdir(sub), ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_glob),      cmocka_unit_test(test_wildcard),
        cmocka_unit_test(test_clock),     cmocka_unit_test(test_files),
        cmocka_unit_test(test_lockfile),  cmocka_unit_test(test_reading),
        cmocka_unit_test(test_write_new), cmocka_unit_test(test_host),
        cmocka_unit_test(test_sockets),   cmocka_unit_test(test_paths),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
