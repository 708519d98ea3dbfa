/* Internal error helpers: record a message at the failure site and propagate status codes.
 *
 * Usage:
 *   VKG_CHECK(n > 0, VKG_ERR_INVALID_ARG, "n must be positive, got %d", n);
 *   VKG_TRY(vkg_other_call(...));
 *   VKG_TRY_GOTO(status, vkg_other_call(...), fail);   // in functions with a cleanup label
 * These macros never print and never exit; the caller decides what the user sees.
 */
#ifndef VKG_BASE_ERROR_H
#define VKG_BASE_ERROR_H

#include "vkgpt/status.h"

/* printf-style checking of the message formats. mingw-w64: C99's printf (%zu, %lld), which its
 * stdio implements when built with __USE_MINGW_ANSI_STDIO=1 (the Windows build defines it), is
 * gnu_printf there; its plain printf attribute means Microsoft's. */
#if defined(__MINGW32__)
#define VKG_PRINTF_(fmt_idx, arg_idx) __attribute__((format(gnu_printf, fmt_idx, arg_idx)))
#elif defined(__GNUC__)
#define VKG_PRINTF_(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define VKG_PRINTF_(fmt_idx, arg_idx)
#endif

/* Record "file:line: <formatted message>" as the calling thread's error message and return
 * status unchanged, so a failure site can `return vkg__error_set(...)`. */
vkg_status vkg__error_set(vkg_status status, const char *file, int line, const char *fmt, ...)
    VKG_PRINTF_(4, 5);

/* Prefix the calling thread's current message with "<formatted context>: ", for adding what was
 * being done (a file name, a peer) when an error passes through a layer. Returns status. */
vkg_status vkg__error_wrap(vkg_status status, const char *fmt, ...) VKG_PRINTF_(2, 3);

/* Make msg (a copy of an earlier vkg_error_message()) the calling thread's message again, as it
 * was: for putting a failure's message back after cleanup that records messages of its own. */
void vkg__error_restore(const char *msg);

#define VKG_FAIL(status, ...) vkg__error_set((status), __FILE__, __LINE__, __VA_ARGS__)

#define VKG_CHECK(cond, status, ...)                                                               \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return VKG_FAIL((status), __VA_ARGS__);                                                \
    } while (0)

#define VKG_TRY(expr)                                                                              \
    do {                                                                                           \
        vkg_status vkg_try_status_ = (expr);                                                       \
        if (vkg_try_status_ < 0)                                                                   \
            return vkg_try_status_;                                                                \
    } while (0)

/* Variants for functions with a cleanup label: they assign to `st` and jump. */
#define VKG_CHECK_GOTO(st, cond, status, label, ...)                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            (st) = VKG_FAIL((status), __VA_ARGS__);                                                \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

#define VKG_TRY_GOTO(st, expr, label)                                                              \
    do {                                                                                           \
        (st) = (expr);                                                                             \
        if ((st) < 0)                                                                              \
            goto label;                                                                            \
    } while (0)

#endif
