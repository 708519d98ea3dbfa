/* Addresses and ports (see os/net.h): one implementation over BSD sockets and Winsock 2, which
 * differ here only in the socket's type, how it is closed and where its error is read. */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L
#endif
#include "os/net.h"

#include <stdio.h>
#include <string.h>

#if defined(_WIN32)
#include <winsock2.h>
#include <ws2tcpip.h>
typedef SOCKET sock_t;
#define NO_SOCKET INVALID_SOCKET
#define close_socket closesocket
typedef int addrlen_t;
#else
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
typedef int sock_t;
#define NO_SOCKET (-1)
#define close_socket close
typedef socklen_t addrlen_t;
#endif

/* The first address of host (numeric only when numeric) for sockets of type type. */
static int lookup(const char *host, const char *port, int type, int numeric, struct addrinfo **res,
                  char *why, size_t cap)
{
    int rc = vkg_os_net_start(why, cap);
    if (rc != 0)
        return rc;
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = type;
    hints.ai_flags = numeric ? AI_NUMERICHOST : 0;
    rc = getaddrinfo(host, port, &hints, res);
    return rc ? vkg_os__net_error(rc, 1, why, cap) : 0;
}

/* The numeric host of address a (len bytes) into out. */
static int numeric_host(const struct sockaddr *a, addrlen_t len, char *out, size_t cap, char *why,
                        size_t whycap)
{
    int rc = getnameinfo(a, len, out, (addrlen_t)cap, NULL, 0, NI_NUMERICHOST);
    return rc ? vkg_os__net_error(rc, 1, why, whycap) : 0;
}

int vkg_os_resolve_numeric(const char *host, char *out, size_t cap, char *why, size_t whycap)
{
    struct addrinfo *res = NULL;
    int rc = lookup(host, NULL, SOCK_STREAM, 0, &res, why, whycap);
    if (rc != 0)
        return rc;
    rc = numeric_host(res->ai_addr, (addrlen_t)res->ai_addrlen, out, cap, why, whycap);
    freeaddrinfo(res);
    return rc;
}

/* A socket of res's family and type connected to (do_connect) or bound at res's address, and the
 * local address it got, into ss (*len bytes); the socket is closed again. */
static int local_address(const struct addrinfo *res, int type, int do_connect,
                         struct sockaddr_storage *ss, addrlen_t *len, char *why, size_t whycap)
{
    sock_t s = socket(res->ai_family, type, 0);
    *len = sizeof *ss;
    int ok = s != NO_SOCKET &&
             (do_connect ? connect(s, res->ai_addr, (addrlen_t)res->ai_addrlen)
                         : bind(s, res->ai_addr, (addrlen_t)res->ai_addrlen)) == 0 &&
             getsockname(s, (struct sockaddr *)ss, len) == 0;
    int rc = ok ? 0 : vkg_os__net_error(0, 0, why, whycap);
    if (s != NO_SOCKET)
        close_socket(s);
    return rc;
}

int vkg_os_route_source(const char *ip, int port, char *out, size_t cap, char *why, size_t whycap)
{
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo *res = NULL;
    int rc = lookup(ip, ps, SOCK_DGRAM, 1, &res, why, whycap);
    if (rc != 0)
        return rc;
    struct sockaddr_storage ss;
    addrlen_t len;
    rc = local_address(res, SOCK_DGRAM, 1, &ss, &len, why, whycap);
    if (rc == 0)
        rc = numeric_host((struct sockaddr *)&ss, len, out, cap, why, whycap);
    freeaddrinfo(res);
    return rc;
}

int vkg_os_free_port(const char *addr, int *port, char *why, size_t whycap)
{
    struct addrinfo *res = NULL;
    int rc = lookup(addr, "0", SOCK_STREAM, 0, &res, why, whycap);
    if (rc != 0)
        return rc;
    struct sockaddr_storage ss;
    addrlen_t len;
    rc = local_address(res, SOCK_STREAM, 0, &ss, &len, why, whycap);
    if (rc == 0)
        *port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
    freeaddrinfo(res);
    return rc;
}
