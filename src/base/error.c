/* Status names and the thread-local error message. Holds no state besides one buffer per thread;
 * never prints. */
#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define VKG_ERROR_MAX 1024

static _Thread_local char last_message[VKG_ERROR_MAX];
static _Thread_local char last_text[VKG_ERROR_MAX];

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

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* The length of a code location "name.c:123: " (or .h) at s, 0 when s does not start with one. */
static size_t location_at(const char *s)
{
    size_t i = 0;
    while (is_name_char(s[i]))
        i++;
    if (i == 0 || s[i] != '.' || (s[i + 1] != 'c' && s[i + 1] != 'h') || s[i + 2] != ':')
        return 0;
    size_t digits = i + 3;
    for (i = digits; s[i] >= '0' && s[i] <= '9'; i++)
        ;
    return i > digits && s[i] == ':' && s[i + 1] == ' ' ? i + 2 : 0;
}

const char *vkg_error_text(void)
{
    /* A location starts the message or one of its ": "-separated parts (a wrap's prefix, a
     * peer's message passed on). */
    size_t o = 0;
    for (const char *p = last_message; *p && o + 1 < sizeof last_text;) {
        int starts = p == last_message || (p - last_message >= 2 && p[-1] == ' ' && p[-2] == ':');
        size_t skip = starts ? location_at(p) : 0;
        if (skip)
            p += skip;
        else
            last_text[o++] = *p++;
    }
    last_text[o] = '\0';
    return last_text;
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
