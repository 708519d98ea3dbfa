/* vkgpt status codes and the thread-local error message.
 *
 * Every fallible vkgpt function returns a vkg_status: 0 is success, negative values are errors.
 * The failure site records a human-readable message with file:line, readable on the same thread
 * through vkg_error_message(). This header does not print anything and holds no global state
 * other than the per-thread message buffer.
 */
#ifndef VKGPT_STATUS_H
#define VKGPT_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, description): the single list every status code comes from. */
#define VKG_STATUS_LIST(X)                                                                         \
    X(VKG_OK, 0, "ok")                                                                             \
    X(VKG_ERR_INVALID_ARG, -1, "invalid argument")                                                 \
    X(VKG_ERR_NOMEM, -2, "out of memory")                                                          \
    X(VKG_ERR_IO, -3, "input/output error")                                                        \
    X(VKG_ERR_FORMAT, -4, "malformed or unsupported file")                                         \
    X(VKG_ERR_VULKAN, -5, "Vulkan error")                                                          \
    X(VKG_ERR_UNSUPPORTED, -6, "unsupported by this device or build")                              \
    X(VKG_ERR_NOT_FOUND, -7, "not found")                                                          \
    X(VKG_ERR_TIMEOUT, -8, "deadline exceeded")                                                    \
    X(VKG_ERR_NETWORK, -9, "network error")                                                        \
    X(VKG_ERR_PROTOCOL, -10, "protocol violation by a peer")                                       \
    X(VKG_ERR_PEER, -11, "a peer failed or aborted")                                               \
    X(VKG_ERR_ABORTED, -12, "operation aborted")                                                   \
    X(VKG_ERR_STATE, -13, "object in the wrong state for this call")                               \
    X(VKG_ERR_MISMATCH, -14, "results or configurations disagree")

typedef enum vkg_status {
#define VKG_STATUS_ENUM_(name, value, desc) name = (value),
    VKG_STATUS_LIST(VKG_STATUS_ENUM_)
#undef VKG_STATUS_ENUM_
} vkg_status;

/* The symbolic name of a status ("VKG_ERR_IO"); "VKG_UNKNOWN_STATUS" for values not in the list. */
const char *vkg_status_name(vkg_status s);

/* A short English description of a status ("input/output error"). Never NULL. */
const char *vkg_status_str(vkg_status s);

/* The message recorded by the most recent failure on the calling thread ("file.c:12: what went
 * wrong"), or "" when none was recorded. The pointer stays valid until the next failure on this
 * thread. */
const char *vkg_error_message(void);

/* The calling thread's message as a user reads it: vkg_error_message() without the code
 * locations ("file.c:12: ") it holds, its own and those of messages wrapped or passed on from
 * peers; "" when none was recorded. The pointer stays valid until the next call on this thread. */
const char *vkg_error_text(void);

/* Forget the calling thread's recorded message. */
void vkg_error_clear(void);

#ifdef __cplusplus
}
#endif
#endif
