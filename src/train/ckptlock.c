/* The checkpoint folder's lock: one trainer at a time writes a folder's checkpoints and log. An
 * flock() on DIR/vkgpt.lock, which the kernel drops when its holder ends however it ends; the
 * file's text (pid and host name) only serves the message a second claimant gets. Not here: the
 * folder's checkpoints (checkpoint.c). Nothing here prints. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "base/error.h"
#include "train/checkpoint.h"

/* The holder named by the text of a lock file, as "pid 123 on host name", or why it is unknown.
 * Only digits and host-name characters are copied from the file. */
static void describe_holder(int fd, char *out, size_t cap)
{
    char text[160] = "", host[64] = "";
    long pid = 0;
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    if (sscanf(text, "pid %ld host %63[A-Za-z0-9._-]", &pid, host) == 2 && pid > 0)
        snprintf(out, cap, "pid %ld on host %s", pid, host);
    else
        snprintf(out, cap, "a process that has not written its pid and host into the file yet");
}

vkg_status vkg_checkpoint_lock(const char *dir, int *fd)
{
    char path[4096], holder[128], text[160], host[64] = "";
    *fd = -1;
    int len = snprintf(path, sizeof path, "%s/%s", dir, VKG_CHECKPOINT_LOCK_NAME);
    VKG_CHECK(len > 0 && (size_t)len < sizeof path, VKG_ERR_INVALID_ARG, "path '%s/%s' is too long",
              dir, VKG_CHECKPOINT_LOCK_NAME);
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    VKG_CHECK(f >= 0, VKG_ERR_IO, "%s: cannot open the checkpoint folder's lock file: %s", path,
              strerror(errno));
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        describe_holder(f, holder, sizeof holder);
        close(f);
        VKG_CHECK(err != EWOULDBLOCK, VKG_ERR_STATE,
                  "checkpoint folder %s is in use by another trainer (%s, holding %s): two runs "
                  "must not write one folder; wait for it to end, stop it, or use another folder",
                  dir, holder, path);
        return VKG_FAIL(VKG_ERR_IO, "%s: cannot lock: %s", path, strerror(err));
    }
    if (gethostname(host, sizeof host - 1) != 0 || !host[0])
        snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    len = snprintf(text, sizeof text, "pid %ld host %s\n", (long)getpid(), host);
    if (ftruncate(f, 0) != 0 || pwrite(f, text, (size_t)len, 0) != (ssize_t)len) {
        int err = errno;
        close(f);
        return VKG_FAIL(VKG_ERR_IO, "%s: cannot write the lock file: %s", path, strerror(err));
    }
    *fd = f;
    return VKG_OK;
}

void vkg_checkpoint_unlock(int *fd)
{
    if (!fd || *fd < 0)
        return;
    int rc = ftruncate(*fd, 0); /* the text only informs: the lock goes with the close anyway */
    (void)rc;
    close(*fd);
    *fd = -1;
}
