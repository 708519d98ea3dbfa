/* Sockets and addresses, in the platform layer (src/os; see clock.h): what the transport does with
 * the network itself, beside ZeroMQ (which opens its own sockets): resolving a name to a numeric
 * address, the local address that reaches a peer, a free port, and a wake-up that a poll over
 * sockets can watch. BSD sockets on POSIX, Winsock on Windows (started once, on first use, and
 * left running until the process ends). Every function that can fail returns 0 or an error
 * code and writes the system's explanation into why (cap bytes, NUL-terminated). */
#ifndef VKG_OS_NET_H
#define VKG_OS_NET_H

#include <stddef.h>
#include <stdint.h>

/* What a poll watches for a descriptor that is not a ZeroMQ socket (zmq_pollitem_t's fd): an int
 * on POSIX, a SOCKET (an unsigned pointer-sized integer) on Windows. */
#if defined(_WIN32)
typedef uintptr_t vkg_os_socket;
#else
typedef int vkg_os_socket;
#endif

/* Start the system's sockets (WSAStartup on Windows, once per process, whatever the thread;
 * nothing on POSIX). The functions below call it themselves. */
int vkg_os_net_start(char *why, size_t cap);

/* The numeric form ("127.0.0.1", "::1") of host (a name or an address) into out (cap bytes). */
int vkg_os_resolve_numeric(const char *host, char *out, size_t cap, char *why, size_t whycap);

/* The numeric local address this host would send from to reach ip:port (a UDP connect, which
 * sends nothing) into out (cap bytes). */
int vkg_os_route_source(const char *ip, int port, char *out, size_t cap, char *why, size_t whycap);

/* A TCP port on addr that nothing listens on now (bound to port 0, read back, closed): *port. */
int vkg_os_free_port(const char *addr, int *port, char *why, size_t whycap);

/* 1 when ZeroMQ's ipc:// transport (Unix-domain sockets, as files in a folder) is there to use on
 * this system: POSIX; 0 on Windows, whose libzmq builds have none. */
int vkg_os_has_ipc(void);

/* The implementations' common step: describe error code into why and return it (never 0).
 * gai: code is getaddrinfo's or getnameinfo's; otherwise the last socket call's error (errno,
 * WSAGetLastError) when code is 0. */
int vkg_os__net_error(int code, int gai, char *why, size_t cap);

/* A wake-up: one thread (or a callback on another library's thread) signals, the owner's poll
 * over sockets sees its handle readable until it drains it. An eventfd on Linux, a pipe on other
 * POSIX systems, a UDP socket on the loopback interface that sends to itself on Windows (where
 * only sockets can be polled). Signals before a drain may merge into one. */
typedef struct vkg_os_wake vkg_os_wake;

/* A new wake-up into *out (free with vkg_os_wake_destroy). */
int vkg_os_wake_create(vkg_os_wake **out, char *why, size_t whycap);

/* Signal w (thread-safe, never blocks; a signal that cannot be queued because one is pending is
 * not lost: the pending one wakes the owner). */
void vkg_os_wake_signal(vkg_os_wake *w);

/* Consume every pending signal of w, without blocking. */
void vkg_os_wake_drain(vkg_os_wake *w);

/* The descriptor a poll watches for w's signals (readable while one is pending). */
vkg_os_socket vkg_os_wake_handle(const vkg_os_wake *w);

/* Close w and set *pw = NULL (NULL-safe). */
void vkg_os_wake_destroy(vkg_os_wake **pw);

#endif
