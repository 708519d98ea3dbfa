/* Child processes, what every system does alike (see os/spawn.h and os/spawn_impl.h): finding
 * this program and starting it, remembering how a child ended, stopping it only while it runs,
 * ending and waiting for it before freeing it, describing an ending, and the C runtime's quoting
 * of a Windows command line (plain string work, so it is built and tested everywhere). Not here:
 * any call to the system; posix/spawn.c and win32/spawn.c make those. */
#include "os/spawn.h"

#include <stdio.h>
#include <string.h>

#include "os/spawn_impl.h"

static vkg_os__child_base *base(vkg_os_child *c)
{
    return (vkg_os__child_base *)c;
}

int vkg_os_spawn_self(char *const *args, const char *const *env, vkg_os_child **out, char *err,
                      size_t cap)
{
    *out = NULL;
    char path[4096];
    int e = vkg_os__self_path(path, sizeof path, err, cap);
    return e ? e : vkg_os__spawn(path, args, env, out, err, cap);
}

int vkg_os_child_ended(vkg_os_child *c, vkg_os_exit *how)
{
    vkg_os__child_base *b = base(c);
    if (!b->ended) {
        if (!vkg_os__child_reap(c, 0, &b->how))
            return 0;
        b->ended = 1;
    }
    *how = b->how;
    return 1;
}

int vkg_os_child_frozen(vkg_os_child *c)
{
    return !base(c)->ended && vkg_os__child_frozen(c);
}

void vkg_os_child_stop(vkg_os_child *c, int now)
{
    if (!base(c)->ended)
        vkg_os__child_signal(c, now);
}

long vkg_os_child_id(const vkg_os_child *c)
{
    return ((const vkg_os__child_base *)c)->id;
}

void vkg_os_child_free(vkg_os_child *c)
{
    if (!c)
        return;
    vkg_os__child_base *b = base(c);
    if (!b->ended) {
        vkg_os__child_signal(c, 1);
        vkg_os__child_reap(c, 1, &b->how);
        b->ended = 1;
    }
    vkg_os__child_release(c);
}

void vkg_os_exit_describe(vkg_os_exit how, char *buf, size_t cap)
{
    if (how.signal)
        snprintf(buf, cap, "was killed by signal %d (%s)", how.signal,
                 vkg_os__signal_name(how.signal));
    else if ((unsigned)how.code >= 0xC0000000u) /* Windows: an exception's NTSTATUS, in hex */
        snprintf(buf, cap, "exited with status 0x%08X (an exception)", (unsigned)how.code);
    else
        snprintf(buf, cap, "exited with status %d", how.code);
}

int vkg_os__quote_arg(char *line, size_t cap, size_t *pos, const char *arg)
{
    size_t p = *pos;
#define PUT(ch)                                                                                    \
    do {                                                                                           \
        if (p + 1 >= cap)                                                                          \
            return -1;                                                                             \
        line[p++] = (ch);                                                                          \
    } while (0)
    if (p)
        PUT(' ');
    int plain = arg[0] != '\0' && !strpbrk(arg, " \t\n\v\"");
    if (plain) {
        for (const char *a = arg; *a; a++)
            PUT(*a);
    } else {
        PUT('"');
        for (const char *a = arg;; a++) {
            size_t slashes = 0;
            while (*a == '\\')
                slashes++, a++;
            if (*a == '\0') {
                for (size_t i = 0; i < slashes * 2; i++)
                    PUT('\\');
                break;
            }
            if (*a == '"') {
                for (size_t i = 0; i < slashes * 2 + 1; i++)
                    PUT('\\');
            } else {
                for (size_t i = 0; i < slashes; i++)
                    PUT('\\');
            }
            PUT(*a);
        }
        PUT('"');
    }
#undef PUT
    line[p] = '\0';
    *pos = p;
    return 0;
}
