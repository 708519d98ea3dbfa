/* Sockets and the wake-up, Windows (see os/net.h): Winsock 2, started once per process; the
 * wake-up is a UDP socket on 127.0.0.1 connected to itself (select, which ZeroMQ's poll uses
 * there, watches sockets only). The addresses are in os/addr.c. */
#include "os/net.h"

#include <winsock2.h>
#include <ws2tcpip.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static INIT_ONCE net_once = INIT_ONCE_STATIC_INIT;
static int net_error; /* WSAStartup's outcome, written once under net_once */

static BOOL CALLBACK start_once(PINIT_ONCE once, PVOID arg, PVOID *ctx)
{
    (void)once;
    (void)arg;
    (void)ctx;
    WSADATA d;
    net_error = WSAStartup(MAKEWORD(2, 2), &d);
    return TRUE;
}

/* The system's text for Winsock error e into why. */
static int explain(int e, char *why, size_t cap)
{
    char msg[256] = "";
    if (!FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL, (DWORD)e,
                        0, msg, sizeof msg, NULL))
        msg[0] = '\0';
    msg[strcspn(msg, "\r\n")] = '\0';
    snprintf(why, cap, "%s (Winsock error %d)", msg[0] ? msg : "unknown error", e);
    return e ? e : -1;
}

int vkg_os_has_ipc(void)
{
    return 0;
}

int vkg_os_net_start(char *why, size_t cap)
{
    InitOnceExecuteOnce(&net_once, start_once, NULL, NULL);
    if (net_error)
        return explain(net_error, why, cap);
    if (cap)
        why[0] = '\0';
    return 0;
}

int vkg_os__net_error(int code, int gai, char *why, size_t cap)
{
    (void)gai; /* getaddrinfo's codes are Winsock's */
    return explain(code ? code : WSAGetLastError(), why, cap);
}

/* ---- the wake-up ---- */

struct vkg_os_wake {
    SOCKET s; /* UDP, bound to 127.0.0.1, connected to its own address, non-blocking */
};

int vkg_os_wake_create(vkg_os_wake **out, char *why, size_t whycap)
{
    *out = NULL;
    int rc = vkg_os_net_start(why, whycap);
    if (rc != 0)
        return rc;
    vkg_os_wake *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(why, whycap, "out of memory");
        return -1;
    }
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int len = sizeof a;
    u_long nonblocking = 1;
    w->s = socket(AF_INET, SOCK_DGRAM, IPPROTO_UDP);
    if (w->s == INVALID_SOCKET || bind(w->s, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(w->s, (struct sockaddr *)&a, &len) != 0 ||
        connect(w->s, (struct sockaddr *)&a, len) != 0 ||
        ioctlsocket(w->s, FIONBIO, &nonblocking) != 0 ||
        !SetHandleInformation((HANDLE)w->s, HANDLE_FLAG_INHERIT, 0)) {
        rc = explain(WSAGetLastError(), why, whycap);
        if (w->s != INVALID_SOCKET)
            closesocket(w->s);
        free(w);
        return rc;
    }
    *out = w;
    return 0;
}

void vkg_os_wake_signal(vkg_os_wake *w)
{
    char one = 1;
    (void)send(w->s, &one, 1, 0); /* WSAEWOULDBLOCK: the buffer is full of pending wake-ups */
}

void vkg_os_wake_drain(vkg_os_wake *w)
{
    char buf[64];
    while (recv(w->s, buf, sizeof buf, 0) > 0) {
    }
}

vkg_os_socket vkg_os_wake_handle(const vkg_os_wake *w)
{
    return (vkg_os_socket)w->s;
}

void vkg_os_wake_destroy(vkg_os_wake **pw)
{
    vkg_os_wake *w = pw ? *pw : NULL;
    if (!w)
        return;
    closesocket(w->s);
    free(w);
    *pw = NULL;
}
