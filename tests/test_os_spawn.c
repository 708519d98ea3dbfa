/* The platform layer's child processes (os/spawn.h) as every caller sees them, whatever the system;
 * the children are this program again, in one of the modes of child_main:
 *  - arguments arrive as given (blanks, quotes, backslashes, an empty one), the environment's
 *    additions are set, standard output and error come apart and whole, the exit code is kept;
 *  - a stop request reaches the child's vkg_os_on_stop as VKG_OS_STOP_TERMINATE and it ends as
 *    it chooses; an immediate stop ends it however it is (SIGKILL, or exit 137 on Windows);
 *  - a child dies with its parent: a grandchild writing a heartbeat stops writing once the child
 *    that started it is ended at once;
 *  - the command line Windows' children get (vkg_os__quote_arg, plain string work checked on
 *    every system): the C runtime's quoting, and a line that does not fit refused whole. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/clock.h"
#include "os/file.h"
#include "os/proc.h"
#include "os/spawn.h"
#include "os/spawn_impl.h"

static const char *self_name = "test_os_spawn";

/* --- the children ----------------------------------------------------------------------- */

static volatile sig_atomic_t stop_asked;

static void on_stop(int stop)
{
    stop_asked = stop;
}

static int child_main(int argc, char **argv)
{
    const char *mode = argv[2];
    if (!strcmp(mode, "echo")) { /* each argument on a line; the variable on stderr */
        for (int i = 3; i < argc; i++)
            printf("<%s>\n", argv[i]);
        const char *v = getenv("VKG_TEST_SPAWN_VALUE");
        fprintf(stderr, "value=%s\n", v ? v : "(unset)");
        return 7;
    }
    if (!strcmp(mode, "wait-stop")) { /* until asked to stop */
        vkg_os_on_stop(on_stop);
        printf("ready\n");
        fflush(stdout);
        for (int i = 0; i < 3000 && !stop_asked; i++)
            vkg_os_sleep_ms(10);
        printf("stopped %d\n", (int)stop_asked);
        return stop_asked ? 42 : 1;
    }
    if (!strcmp(mode, "heartbeat")) { /* appends to argv[3] every 20 ms, for at most 60 s */
        printf("ready\n");
        fflush(stdout);
        for (int i = 0; i < 3000; i++) {
            FILE *f = fopen(argv[3], "ab");
            if (f)
                fputc('.', f), fclose(f);
            vkg_os_sleep_ms(20);
        }
        return 0;
    }
    if (!strcmp(mode, "parent")) { /* starts a heartbeat grandchild, then waits forever */
        char *args[] = {(char *)self_name, "--child", "heartbeat", argv[3], NULL};
        vkg_os_child *g;
        char err[256];
        if (vkg_os_spawn_self(args, NULL, &g, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return 3;
        }
        printf("ready\n");
        fflush(stdout);
        for (;;)
            vkg_os_sleep_ms(1000);
    }
    return 2;
}

/* --- the parent's side ------------------------------------------------------------------- */

typedef struct output {
    char text[2][4096];
    size_t len[2];
    int ended[2];
} output;

static void collect(void *ctx, int k, int s, const char *data, size_t len)
{
    output *o = &((output *)ctx)[k];
    if (!data) {
        o->ended[s] = 1;
        return;
    }
    size_t room = sizeof o->text[s] - 1 - o->len[s];
    memcpy(o->text[s] + o->len[s], data, len < room ? len : room);
    o->len[s] += len < room ? len : room;
    o->text[s][o->len[s]] = '\0';
}

/* Drop the '\r' Windows' text mode writes before each '\n'. */
static void unix_lines(char *s)
{
    char *w = s;
    for (; *s; s++)
        if (*s != '\r')
            *w++ = *s;
    *w = '\0';
}

static vkg_os_child *start(char **args, const char *const *env)
{
    vkg_os_child *c = NULL;
    char err[256] = "";
    int e = vkg_os_spawn_self(args, env, &c, err, sizeof err);
    if (e)
        fail_msg("vkg_os_spawn_self: %s", err);
    return c;
}

/* Pump c's output into o until text appears on its standard output (or 30 s pass). */
static void wait_for(vkg_os_child *c, output *o, const char *text)
{
    double until = vkg_os_now_ms() + 30000.0;
    while (!strstr(o->text[0], text) && vkg_os_now_ms() < until)
        vkg_os_children_pump(&c, 1, 50, collect, o);
    assert_non_null(strstr(o->text[0], text));
}

static vkg_os_exit wait_end(vkg_os_child *c, output *o)
{
    vkg_os_exit how = {0, 0};
    double until = vkg_os_now_ms() + 30000.0;
    int ended = 0;
    while (!(ended && o->ended[0] && o->ended[1]) && vkg_os_now_ms() < until) {
        vkg_os_children_pump(&c, 1, 50, collect, o);
        ended = ended || vkg_os_child_ended(c, &how);
    }
    assert_true(ended);
    assert_true(o->ended[0] && o->ended[1]);
    unix_lines(o->text[0]), unix_lines(o->text[1]);
    return how;
}

static void test_arguments_and_output(void **state)
{
    (void)state;
    char *args[] = {
        (char *)self_name, "--child", "echo", "plain",     "two words", "a \"quoted\" one",
        "back\\slash\\",   "\\\"",    "",     "tab\there", NULL};
    const char *env[] = {"VKG_TEST_SPAWN_VALUE=v 1", NULL};
    vkg_os_child *c = start(args, env);
    assert_true(vkg_os_child_id(c) > 0);
    output o;
    memset(&o, 0, sizeof o);
    vkg_os_exit how = wait_end(c, &o);
    assert_string_equal(o.text[0], "<plain>\n<two words>\n<a \"quoted\" one>\n<back\\slash\\>\n"
                                   "<\\\">\n<>\n<tab\there>\n");
    assert_string_equal(o.text[1], "value=v 1\n");
    assert_int_equal(how.signal, 0);
    assert_int_equal(how.code, 7);
    vkg_os_exit again;
    assert_int_equal(vkg_os_child_ended(c, &again), 1); /* the same, once reaped */
    assert_int_equal(again.code, 7);
    char why[128];
    vkg_os_exit_describe(how, why, sizeof why);
    assert_string_equal(why, "exited with status 7");
    vkg_os_child_free(c);
}

static void test_stop_request(void **state)
{
    (void)state;
    char *args[] = {(char *)self_name, "--child", "wait-stop", NULL};
    vkg_os_child *c = start(args, NULL);
    output o;
    memset(&o, 0, sizeof o);
    wait_for(c, &o, "ready");
    vkg_os_exit how;
    assert_int_equal(vkg_os_child_ended(c, &how), 0); /* still running */
    vkg_os_child_stop(c, 0);
    how = wait_end(c, &o);
    assert_string_equal(o.text[0], "ready\nstopped 15\n"); /* VKG_OS_STOP_TERMINATE */
    assert_int_equal(how.signal, 0);
    assert_int_equal(how.code, 42);
    vkg_os_child_free(c);
}

static void test_stop_now(void **state)
{
    (void)state;
    char *args[] = {(char *)self_name, "--child", "wait-stop", NULL};
    vkg_os_child *c = start(args, NULL);
    output o;
    memset(&o, 0, sizeof o);
    wait_for(c, &o, "ready");
    vkg_os_child_stop(c, 1);
    vkg_os_exit how = wait_end(c, &o);
    char why[128];
    vkg_os_exit_describe(how, why, sizeof why);
#if defined(_WIN32)
    assert_int_equal(how.signal, 0);
    assert_int_equal(how.code, 137);
    assert_string_equal(why, "exited with status 137");
#else
    assert_int_equal(how.signal, SIGKILL);
    assert_int_equal(how.code, 128 + SIGKILL);
    assert_string_equal(why, "was killed by signal 9 (SIGKILL)");
#endif
    vkg_os_child_free(c);
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static void test_dies_with_parent(void **state)
{
    (void)state;
    char dir[64], beat[128];
    snprintf(dir, sizeof dir, "/tmp/vkg_test_spawn_XXXXXX");
    assert_int_equal(vkg_os_mkdtemp(dir), 0);
    snprintf(beat, sizeof beat, "%s/heartbeat", dir);
    char *args[] = {(char *)self_name, "--child", "parent", beat, NULL};
    vkg_os_child *c = start(args, NULL);
    output o;
    memset(&o, 0, sizeof o);
    wait_for(c, &o, "ready");
    double until = vkg_os_now_ms() + 30000.0;
    while (file_size(beat) < 3 && vkg_os_now_ms() < until)
        vkg_os_sleep_ms(20);
    assert_true(file_size(beat) >= 3); /* the grandchild is alive */
    vkg_os_child_stop(c, 1);
    wait_end(c, &o);
    vkg_os_child_free(c);
    /* Its parent gone, the grandchild ends (at the latest when its next write fails to matter):
     * the heartbeat stops within a few seconds. */
    long before = -1, now = file_size(beat);
    until = vkg_os_now_ms() + 20000.0;
    while (now != before && vkg_os_now_ms() < until) {
        before = now;
        vkg_os_sleep_ms(500);
        now = file_size(beat);
    }
    assert_int_equal(now, before);
    remove(beat);
    assert_int_equal(vkg_os_rmdir(dir), 0);
}

static void test_quote_arg(void **state)
{
    (void)state;
    /* plain, empty, a blank, quotes, a trailing backslash without and with quoting around it, a
     * backslash before a quote */
    const char *args[] = {"plain", "", "a b", "say \"hi\"", "dir\\", "a b\\", "a\\\"b"};
    const char *want = "plain \"\" \"a b\" \"say \\\"hi\\\"\" dir\\ \"a b\\\\\" \"a\\\\\\\"b\"";
    char line[128];
    size_t pos = 0;
    for (size_t i = 0; i < sizeof args / sizeof *args; i++)
        assert_int_equal(vkg_os__quote_arg(line, sizeof line, &pos, args[i]), 0);
    assert_string_equal(line, want);
    assert_int_equal(pos, strlen(want));

    char small[12];
    pos = 0;
    assert_int_equal(vkg_os__quote_arg(small, sizeof small, &pos, "first"), 0);
    assert_int_equal(vkg_os__quote_arg(small, sizeof small, &pos, "second"), -1);
    assert_int_equal(pos, 5); /* unmoved: "first" stays the line */
    assert_int_equal(vkg_os__quote_arg(small, sizeof small, &pos, "x"), 0);
    assert_string_equal(small, "first x");
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "--child"))
        return child_main(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arguments_and_output),
        cmocka_unit_test(test_stop_request),
        cmocka_unit_test(test_stop_now),
        cmocka_unit_test(test_dies_with_parent),
        cmocka_unit_test(test_quote_arg),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
