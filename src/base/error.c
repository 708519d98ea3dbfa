/* Status names and the thread-local error message. Holds no state besides one buffer per thread;
 * never prints. */
#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define VKG_ERROR_MAX 1024

static _Thread_local char last_message[VKG_ERROR_MAX];

const char *vkg_status_name(vkg_status s)
{
    switch (s) {
#define VKG_STATUS_NAME_(name, value, desc)                                                        \
    case name:                                                                                     \
        return #name;
        VKG_STATUS_LIST(VKG_STATUS_NAME_)
#undef VKG_STATUS_NAME_
    }
    return "VKG_UNKNOWN_STATUS";
}

const char *vkg_status_str(vkg_status s)
{
    switch (s) {
#define VKG_STATUS_DESC_(name, value, desc)                                                        \
    case name:                                                                                     \
        return desc;
        VKG_STATUS_LIST(VKG_STATUS_DESC_)
#undef VKG_STATUS_DESC_
    }
    return "unknown status";
}

const char *vkg_error_message(void)
{
    return last_message;
}

void vkg_error_clear(void)
{
    last_message[0] = '\0';
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

vkg_status vkg__error_set(vkg_status status, const char *file, int line, const char *fmt, ...)
{
    char text[VKG_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    /* Longer messages are cut at VKG_ERROR_MAX: the start says what failed. */
    if (snprintf(last_message, sizeof last_message, "%s:%d: %s", base_name(file), line, text) < 0)
        last_message[0] = '\0';
    return status;
}

vkg_status vkg__error_wrap(vkg_status status, const char *fmt, ...)
{
    char prefix[VKG_ERROR_MAX];
    char old[VKG_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_message, sizeof old);
    if (snprintf(last_message, sizeof last_message, "%s: %s", prefix, old) < 0)
        memcpy(last_message, old, sizeof old);
    return status;
}

void vkg__error_restore(const char *msg)
{
    snprintf(last_message, sizeof last_message, "%s", msg ? msg : "");
}
