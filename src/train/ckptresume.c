/* Resuming from a checkpoint folder (vkg_checkpoint_resume, rules in checkpoint.h): the newest
 * step directory marked complete that loads, and with fallback the damaged newer ones set aside as
 * step_<n>.damaged, with a note of each directory passed over and why. Not here: writing, loading
 * and pruning checkpoints (checkpoint.c), the files themselves (statefile.c, src/io). Nothing here
 * prints. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "train/checkpoint_internal.h"

/* Rename the checkpoint directory sd (named name, under dir) to the first free name of
 * <name>.damaged, <name>.damaged.2, ...; its new name goes to moved (cap bytes). */
static vkg_status set_aside(const char *dir, const char *sd, const char *name, char *moved,
                            size_t cap)
{
    char to[VKG_CHECKPOINT_PATH_CAP], aside[VKG_CHECKPOINT_NAME_CAP + 16];
    for (int k = 1; k < 1000; k++) {
        if (k == 1)
            snprintf(aside, sizeof aside, "%s.damaged", name);
        else
            snprintf(aside, sizeof aside, "%s.damaged.%d", name, k);
        VKG_TRY(vkg__checkpoint_join(to, dir, aside));
        int there = vkg_os_exists(to);
        if (there == 1)
            continue;
        VKG_CHECK(there == 0, VKG_ERR_IO, "%s: cannot look it up: %s", to, strerror(errno));
        VKG_CHECK(rename(sd, to) == 0, VKG_ERR_IO, "cannot rename %s to %s: %s", sd, to,
                  strerror(errno));
        snprintf(moved, cap, "%s", aside);
        return vkg__checkpoint_sync_dir(dir);
    }
    return VKG_FAIL(VKG_ERR_IO, "%s: no free name to set it aside (%s.damaged.1..999 are taken)",
                    sd, name);
}

/* Append "; " (unless out is empty) and the formatted text to out (cap bytes), truncating. */
static void note(char *out, size_t cap, const char *fmt, ...) VKG_PRINTF_(3, 4);
static void note(char *out, size_t cap, const char *fmt, ...)
{
    size_t len = strlen(out);
    if (len + 3 >= cap)
        return;
    if (len) {
        memcpy(out + len, "; ", 3);
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + len, cap - len, fmt, ap);
    va_end(ap);
}

vkg_status vkg_checkpoint_resume(const char *dir, int fallback, vkg_checkpoint *out, char *path_out,
                                 size_t cap, char *notes, size_t notes_cap)
{
    enum { WHY = 700 };
    vkg_checkpoint_entry *e = NULL;
    size_t n = 0, i, marked = 0, newest_bad = 0;
    char sd[VKG_CHECKPOINT_PATH_CAP], done[VKG_CHECKPOINT_PATH_CAP],
        moved[VKG_CHECKPOINT_NAME_CAP + 16];
    char(*why)[WHY] = NULL; /* why each complete checkpoint newer than the chosen one failed */
    vkg_status st = VKG_OK, bad = VKG_OK;
    VKG_CHECK(dir && out && path_out && notes && notes_cap, VKG_ERR_INVALID_ARG,
              "checkpoint: NULL argument");
    memset(out, 0, sizeof *out);
    notes[0] = '\0';
    VKG_TRY(vkg__checkpoint_list_steps(dir, &e, &n));
    why = calloc(n ? n : 1, sizeof *why);
    VKG_CHECK_GOTO(st, why, VKG_ERR_NOMEM, done, "%s: out of memory", dir);
    for (i = 0; i < n; i++) {
        VKG_TRY_GOTO(st, vkg__checkpoint_join(sd, dir, e[i].name), done);
        VKG_TRY_GOTO(st, vkg__checkpoint_join(done, sd, "DONE"), done);
        if (!vkg__checkpoint_is_file(done))
            continue; /* an interrupted write: never resumed from */
        marked++;
        vkg_status ls = vkg_checkpoint_load(sd, out);
        if (ls == VKG_OK)
            break;
        if (!fallback) {
            st = vkg__error_wrap(ls,
                                 "%s is marked complete (DONE) but does not load; nothing "
                                 "was changed",
                                 sd);
            goto done;
        }
        snprintf(why[i], WHY, "%s", vkg_error_message()[0] ? vkg_error_message() : "failed");
        if (bad == VKG_OK)
            bad = ls, newest_bad = i;
    }
    if (i == n && marked) {
        st = VKG_FAIL(bad,
                      "%s: none of its %zu checkpoints marked complete loads (nothing was "
                      "changed); the newest, %s: %s",
                      dir, marked, e[newest_bad].name, why[newest_bad]);
        goto done;
    }
    VKG_CHECK_GOTO(st, i < n, VKG_ERR_NOT_FOUND, done,
                   "%s: no checkpoint marked complete among %zu step directories", dir, n);
    VKG_CHECK_GOTO(st, strlen(sd) < cap, VKG_ERR_INVALID_ARG, done,
                   "%s: path longer than the %zu-byte buffer", sd, cap);
    snprintf(path_out, cap, "%s", sd);
    for (size_t k = 0; k < i;
         k++) { /* the newer directories passed over, and what became of them */
        if (!why[k][0]) {
            note(notes, notes_cap, "%s (no DONE marker: an interrupted write)", e[k].name);
            continue;
        }
        VKG_TRY_GOTO(st, vkg__checkpoint_join(sd, dir, e[k].name), done);
        VKG_TRY_GOTO(st, set_aside(dir, sd, e[k].name, moved, sizeof moved), done);
        note(notes, notes_cap, "%s (does not load: %s; set aside untouched as %s)", e[k].name,
             why[k], moved);
    }
    vkg_error_clear();
done:
    if (st != VKG_OK)
        vkg_checkpoint_deinit(out);
    free(why);
    free(e);
    return st;
}
