/* Communicator configuration: defaults, enum names, CURVE key files and a free-port helper.
 * Parses strings into the config struct once; opens no sockets (except the throwaway one of
 * vkg_comm_pick_port). Not here: reading the launcher's environment (config_env.c).
 */
#include "comm_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

void vkg_comm_config_default(vkg_comm_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->world_size = 1;
    cfg->launcher = VKG_COMM_LAUNCH_NONE;
    cfg->transport = VKG_COMM_TCP;
    snprintf(cfg->master_addr, sizeof cfg->master_addr, "127.0.0.1");
    cfg->master_port = 29500;
    snprintf(cfg->ipc_dir, sizeof cfg->ipc_dir, "/tmp");
    cfg->job_id = 1;
    cfg->timeout_ms = 60000;
}

const char *vkg_comm_transport_name(vkg_comm_transport t)
{
    switch (t) {
    case VKG_COMM_TCP:
        return "tcp";
    case VKG_COMM_IPC:
        return "ipc";
    case VKG_COMM_INPROC:
        return "inproc";
    }
    return "?";
}

const char *vkg_comm_launcher_name(vkg_comm_launcher l)
{
    switch (l) {
    case VKG_COMM_LAUNCH_NONE:
        return "none";
    case VKG_COMM_LAUNCH_TORCHRUN:
        return "torchrun";
    case VKG_COMM_LAUNCH_SLURM:
        return "slurm";
    case VKG_COMM_LAUNCH_OPENMPI:
        return "openmpi";
    case VKG_COMM_LAUNCH_VKGPT:
        return "vkgpt";
    case VKG_COMM_LAUNCH_KUBEFLOW:
        return "kubeflow";
    case VKG_COMM_LAUNCH_PMI:
        return "pmi";
    case VKG_COMM_LAUNCH_JOBSET:
        return "jobset";
    case VKG_COMM_LAUNCH_FLUX:
        return "flux";
    }
    return "?";
}

vkg_status vkg_comm_transport_parse(const char *name, vkg_comm_transport *out)
{
    static const vkg_comm_transport all[] = {VKG_COMM_TCP, VKG_COMM_IPC, VKG_COMM_INPROC};
    for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++) {
        if (!strcmp(name, vkg_comm_transport_name(all[i]))) {
            *out = all[i];
            return VKG_OK;
        }
    }
    return VKG_FAIL(VKG_ERR_INVALID_ARG, "unknown transport '%s' (valid: tcp, ipc, inproc)",
                    name ? name : "(null)");
}

const char *vkg_comm_shm_name(vkg_comm_shm s)
{
    switch (s) {
    case VKG_COMM_SHM_AUTO:
        return "auto";
    case VKG_COMM_SHM_REQUIRE:
        return "shm";
    case VKG_COMM_SHM_OFF:
        return "zmq";
    }
    return "?";
}

vkg_status vkg_comm_transport_select(const char *name, vkg_comm_transport *t, vkg_comm_shm *shm)
{
    if (name && !strcmp(name, "shm")) {
        *shm = VKG_COMM_SHM_REQUIRE;
        return VKG_OK;
    }
    if (name && !strcmp(name, "zmq")) {
        *shm = VKG_COMM_SHM_OFF;
        return VKG_OK;
    }
    vkg_comm_transport x = VKG_COMM_TCP;
    if (!name || vkg_comm_transport_parse(name, &x) != VKG_OK)
        return VKG_FAIL(VKG_ERR_INVALID_ARG,
                        "unknown transport '%s' (valid: tcp, ipc, inproc, shm: require shared "
                        "memory between the ranks of a host, zmq: never use it)",
                        name ? name : "(null)");
    *t = x;
    *shm = VKG_COMM_SHM_AUTO;
    return VKG_OK;
}

size_t vkg_comm_dtype_size(vkg_comm_dtype dt)
{
    return dt == VKG_COMM_F32 ? 4 : 2;
}

/* ---- CURVE keys ---- */

int vkg_comm_has_curve(void)
{
    return zmq_has("curve") ? 1 : 0;
}

vkg_status vkg_comm_curve_keypair(char pub[VKG_COMM_KEY_CHARS + 1],
                                  char sec[VKG_COMM_KEY_CHARS + 1])
{
    VKG_CHECK(vkg_comm_has_curve(), VKG_ERR_UNSUPPORTED,
              "this libzmq was built without CURVE (libsodium) support");
    VKG_CHECK(zmq_curve_keypair(pub, sec) == 0, VKG_ERR_UNSUPPORTED, "zmq_curve_keypair: %s",
              zmq_strerror(zmq_errno()));
    return VKG_OK;
}

static int valid_key(const char *k)
{
    uint8_t bin[32];
    return k && strlen(k) == VKG_COMM_KEY_CHARS && zmq_z85_decode(bin, k) != NULL;
}

static vkg_status write_file(const char *path, mode_t mode, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode);
    VKG_CHECK(fd >= 0, VKG_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    size_t n = strlen(text);
    ssize_t w = write(fd, text, n);
    int ok = w == (ssize_t)n && fsync(fd) == 0;
    int e = errno;
    close(fd);
    VKG_CHECK(ok, VKG_ERR_IO, "writing %s: %s", path, strerror(e));
    return VKG_OK;
}

vkg_status vkg_comm_keyfile_write(const char *path, const char *pub, const char *sec)
{
    VKG_CHECK(path && *path, VKG_ERR_INVALID_ARG, "key file path is empty");
    VKG_CHECK(valid_key(pub) && valid_key(sec), VKG_ERR_INVALID_ARG,
              "keys must be 40-character Z85 CURVE keys");
    char pubpath[PATH_MAX], text[512];
    VKG_CHECK(snprintf(pubpath, sizeof pubpath, "%s.pub", path) < (int)sizeof pubpath,
              VKG_ERR_INVALID_ARG, "key file path too long: %s", path);
    snprintf(text, sizeof text,
             "# vkgpt CURVE key pair (vkgpt keygen). Keep this file secret.\n"
             "public = %s\nsecret = %s\n",
             pub, sec);
    VKG_TRY(write_file(path, 0600, text));
    snprintf(text, sizeof text, "# vkgpt CURVE public key (vkgpt keygen)\npublic = %s\n", pub);
    return write_file(pubpath, 0644, text);
}

vkg_status vkg__open_small_file(const char *path, const char *what, long max_bytes, FILE **out)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    VKG_CHECK(fd >= 0, VKG_ERR_IO, "cannot open %s %s: %s", what, path, strerror(errno));
    struct stat sb;
    vkg_status st = VKG_OK;
    if (fstat(fd, &sb) != 0)
        st = VKG_FAIL(VKG_ERR_IO, "cannot stat %s %s: %s", what, path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = VKG_FAIL(VKG_ERR_IO, "%s %s is not a regular file (a %s)", what, path,
                      S_ISDIR(sb.st_mode)    ? "directory"
                      : S_ISFIFO(sb.st_mode) ? "FIFO"
                      : S_ISCHR(sb.st_mode)  ? "character device"
                      : S_ISSOCK(sb.st_mode) ? "socket"
                                             : "special file");
    else if (sb.st_size > max_bytes)
        st = VKG_FAIL(VKG_ERR_FORMAT, "%s %s is %lld bytes, more than such a file holds (%ld)",
                      what, path, (long long)sb.st_size, max_bytes);
    if (st == VKG_OK && !(*out = fdopen(fd, "r")))
        st = VKG_FAIL(VKG_ERR_IO, "cannot read %s %s: %s", what, path, strerror(errno));
    if (st < 0)
        close(fd);
    return st;
}

vkg_status vkg_comm_keyfile_read(const char *path, char pub[VKG_COMM_KEY_CHARS + 1],
                                 char sec[VKG_COMM_KEY_CHARS + 1])
{
    VKG_CHECK(path != NULL, VKG_ERR_INVALID_ARG, "key file path is NULL");
    FILE *f;
    VKG_TRY(vkg__open_small_file(path, "key file", 64 << 10, &f));
    char line[256];
    int lineno = 0;
    pub[0] = sec[0] = '\0';
    vkg_status st = VKG_OK;
    while (st == VKG_OK && fgets(line, sizeof line, f)) {
        lineno++;
        char name[16], value[128];
        if (line[0] == '#' || strspn(line, " \t\r\n") == strlen(line))
            continue;
        if (sscanf(line, " %15[a-z] = %127s", name, value) != 2 || !valid_key(value) ||
            (strcmp(name, "public") && strcmp(name, "secret")))
            st = VKG_FAIL(VKG_ERR_FORMAT,
                          "%s:%d: expected 'public = <40 Z85 chars>' or 'secret = <...>'", path,
                          lineno);
        else {
            char *dst = !strcmp(name, "public") ? pub : sec;
            memcpy(dst, value, VKG_COMM_KEY_CHARS); /* valid_key checked the length */
            dst[VKG_COMM_KEY_CHARS] = '\0';
        }
    }
    fclose(f);
    VKG_TRY(st);
    VKG_CHECK(pub[0], VKG_ERR_FORMAT, "%s: no 'public = ...' line", path);
    if (sec[0]) {
        char derived[VKG_COMM_KEY_CHARS + 1];
        VKG_CHECK(zmq_curve_public(derived, sec) == 0 && !strcmp(derived, pub), VKG_ERR_FORMAT,
                  "%s: the public key does not belong to the secret key", path);
    }
    return VKG_OK;
}

/* ---- process tuning ---- */

void vkg_comm_tune_malloc(void)
{
#if defined(__GLIBC__)
    mallopt(M_MMAP_THRESHOLD,
            32 << 20); /* the largest glibc accepts; also stops the dynamic rule */
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

/* ---- ports ---- */

vkg_status vkg_comm_pick_port(const char *addr, int *port)
{
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int rc = getaddrinfo(addr, "0", &hints, &res);
    VKG_CHECK(rc == 0, VKG_ERR_NETWORK, "cannot resolve %s: %s", addr, gai_strerror(rc));
    int fd = socket(res->ai_family, SOCK_STREAM, 0);
    vkg_status st = VKG_OK;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) < 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        st = VKG_FAIL(VKG_ERR_NETWORK, "cannot bind a probe socket on %s: %s", addr,
                      strerror(errno));
    else
        *port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
    if (fd >= 0)
        close(fd);
    freeaddrinfo(res);
    return st;
}
