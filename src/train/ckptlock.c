/* The checkpoint folder's lock: one trainer at a time writes a folder's checkpoints and log. The
 * platform layer's advisory lock (os/file.h: flock; LockFileEx on Windows) on DIR/vkgpt.lock, which
 * the kernel drops when its holder ends however it ends; the file's text (pid and host name) only
 * serves the message a second claimant gets. Not here: the folder's checkpoints (checkpoint.c).
 * Nothing here prints. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "os/file.h"
#include "train/checkpoint.h"

/* The holder named by the text of a lock file, as "pid 123 on host name", or why it is unknown.
 * Only digits and host-name characters are copied from the text. */
static void describe_holder(const char *text, char *out, size_t cap)
{
    char host[64] = "";
    long pid = 0;
    if (sscanf(text, "pid %ld host %63[A-Za-z0-9._-]", &pid, host) == 2 && pid > 0)
        snprintf(out, cap, "pid %ld on host %s", pid, host);
    else
        snprintf(out, cap, "a process that has not written its pid and host into the file yet");
}

vkg_status vkg_checkpoint_lock(const char *dir, vkg_os_lockfile **lock)
{
    char path[4096], holder[128], text[160], host[64];
    *lock = NULL;
    int len = snprintf(path, sizeof path, "%s/%s", dir, VKG_CHECKPOINT_LOCK_NAME);
    VKG_CHECK(len > 0 && (size_t)len < sizeof path, VKG_ERR_INVALID_ARG, "path '%s/%s' is too long",
              dir, VKG_CHECKPOINT_LOCK_NAME);
    vkg_os_lockfile *l = NULL;
    int err = vkg_os_lockfile_take(path, &l, text, sizeof text);
    if (err == EBUSY) {
        describe_holder(text, holder, sizeof holder);
        return VKG_FAIL(VKG_ERR_STATE,
                        "checkpoint folder %s is in use by another trainer (%s, holding %s): two "
                        "runs must not write one folder; wait for it to end, stop it, or use "
                        "another folder",
                        dir, holder, path);
    }
    VKG_CHECK(err == 0, VKG_ERR_IO, "%s: cannot open or lock the checkpoint folder's lock file: %s",
              path, strerror(err));
    vkg_os_hostname(host, sizeof host);
    snprintf(text, sizeof text, "pid %ld host %s\n", vkg_os_pid(), host);
    err = vkg_os_lockfile_write(l, text);
    if (err) {
        vkg_os_lockfile_release(&l);
        return VKG_FAIL(VKG_ERR_IO, "%s: cannot write the lock file: %s", path, strerror(err));
    }
    *lock = l;
    return VKG_OK;
}

void vkg_checkpoint_unlock(vkg_os_lockfile **lock)
{
    vkg_os_lockfile_release(lock);
}
