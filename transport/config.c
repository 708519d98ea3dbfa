/* Communicator configuration: defaults, enum names, CURVE key files and a free-port helper.
 * Parses strings into the config struct once; opens no sockets (except the throwaway one of
 * vkg_comm_pick_port). Not here: reading the launcher's environment (config_env.c).
 */
#include "comm_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/file.h"
#include "os/net.h"
#include "os/proc.h"

/* The longest key file path (the public key's file adds ".pub"). */
#define KEYFILE_PATH_MAX 4096

void vkg_comm_config_default(vkg_comm_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->world_size = 1;
    cfg->launcher = VKG_COMM_LAUNCH_NONE;
    cfg->transport = VKG_COMM_TCP;
    snprintf(cfg->master_addr, sizeof cfg->master_addr, "127.0.0.1");
    cfg->master_port = 29500;
    vkg_os_temp_dir(cfg->ipc_dir, sizeof cfg->ipc_dir);
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

static vkg_status write_file(const char *path, int owner_only, const char *text)
{
    int e = vkg_os_write_new(path, owner_only, text, strlen(text));
    VKG_CHECK(e == 0, VKG_ERR_IO, "cannot write %s: %s", path, strerror(e));
    return VKG_OK;
}

vkg_status vkg_comm_keyfile_write(const char *path, const char *pub, const char *sec)
{
    VKG_CHECK(path && *path, VKG_ERR_INVALID_ARG, "key file path is empty");
    VKG_CHECK(valid_key(pub) && valid_key(sec), VKG_ERR_INVALID_ARG,
              "keys must be 40-character Z85 CURVE keys");
    char pubpath[KEYFILE_PATH_MAX], text[512];
    VKG_CHECK(snprintf(pubpath, sizeof pubpath, "%s.pub", path) < (int)sizeof pubpath,
              VKG_ERR_INVALID_ARG, "key file path too long: %s", path);
    snprintf(text, sizeof text,
             "# vkgpt CURVE key pair (vkgpt keygen). Keep this file secret.\n"
             "public = %s\nsecret = %s\n",
             pub, sec);
    VKG_TRY(write_file(path, 1, text));
    snprintf(text, sizeof text, "# vkgpt CURVE public key (vkgpt keygen)\npublic = %s\n", pub);
    return write_file(pubpath, 0, text);
}

vkg_status vkg__open_small_file(const char *path, const char *what, long max_bytes, FILE **out)
{
    *out = NULL;
    int fd = -1;
    unsigned long long size = 0;
    const char *not_regular = NULL;
    int e = vkg_os_open_read(path, &fd, &size, &not_regular);
    VKG_CHECK(e == 0 || !not_regular, VKG_ERR_IO, "%s %s is not a regular file: %s", what, path,
              not_regular);
    VKG_CHECK(e == 0, VKG_ERR_IO, "cannot open %s %s: %s", what, path, strerror(e));
    vkg_status st = VKG_OK;
    if (size > (unsigned long long)max_bytes)
        st = VKG_FAIL(VKG_ERR_FORMAT, "%s %s is %llu bytes, more than such a file holds (%ld)",
                      what, path, size, max_bytes);
    if (st == VKG_OK && !(*out = vkg_os_fdopen_read(fd)))
        st = VKG_FAIL(VKG_ERR_IO, "cannot read %s %s: %s", what, path, strerror(errno));
    if (st < 0)
        vkg_os_close(fd);
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
    vkg_os_tune_malloc();
}

/* ---- ports ---- */

vkg_status vkg_comm_pick_port(const char *addr, int *port)
{
    char why[160];
    VKG_CHECK(vkg_os_free_port(addr, port, why, sizeof why) == 0, VKG_ERR_NETWORK,
              "cannot bind a probe socket on %s: %s", addr, why);
    return VKG_OK;
}
