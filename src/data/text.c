/* Text input (vkgpt/data.h): reading a whole regular file as text, chunk by chunk, with the check
 * that it is text and a cancellation point per chunk. Shared by the loader, the GPT-2 vocabulary
 * reader and `vkgpt prepare`. Does not tokenize and does not look inside the text beyond that. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/io_internal.h"
#include "os/file.h"
#include "vkgpt/data.h"

#define READ_CHUNK (1u << 20)

/* The first NUL in text[from, to), as an error naming the file. */
static vkg_status check_range(const char *name, const char *text, size_t from, size_t to)
{
    const char *nul = memchr(text + from, '\0', to - from);
    VKG_CHECK(!nul, VKG_ERR_FORMAT,
              "%s looks binary (a NUL byte at offset %zu): text input must not contain NUL bytes",
              name, (size_t)(nul - text));
    return VKG_OK;
}

vkg_status vkg_text_check(const char *name, const char *text, size_t n)
{
    return check_range(name, text, 0, n);
}

vkg_status vkg_text_read(const char *path, const vkg_cancel *cancel, char **text, size_t *n)
{
    int fd = -1;
    uint64_t size = 0;
    vkg_status st = VKG_OK;
    char *buf = NULL;
    size_t len = 0;
    *text = NULL;
    *n = 0;
    VKG_TRY(vkg__io_open_fd(path, &fd, &size));
    VKG_CHECK_GOTO(st, size < SIZE_MAX, VKG_ERR_NOMEM, done, "%s: too large (%llu bytes)", path,
                   (unsigned long long)size);
    buf = malloc((size_t)size + 1);
    VKG_CHECK_GOTO(st, buf, VKG_ERR_NOMEM, done, "%s: out of memory for its %llu bytes", path,
                   (unsigned long long)size);
    while (len < size) {
        VKG_CHECK_GOTO(st, !cancel || !cancel->fn || !cancel->fn(cancel->ctx), VKG_ERR_ABORTED,
                       done, "interrupted while loading %s", path);
        size_t want = size - len < READ_CHUNK ? (size_t)(size - len) : READ_CHUNK;
        long long got = vkg_os_read(fd, buf + len, want);
        VKG_CHECK_GOTO(st, got >= 0, VKG_ERR_IO, done, "%s: read failed: %s", path,
                       strerror(errno));
        if (got == 0) /* the file shrank since it was opened: take what it holds */
            break;
        VKG_TRY_GOTO(st, check_range(path, buf, len, len + (size_t)got), done);
        len += (size_t)got;
    }
    buf[len] = '\0';
done:
    vkg_os_close(fd);
    if (st != VKG_OK) {
        free(buf);
        return st;
    }
    *text = buf;
    *n = len;
    return VKG_OK;
}
