/* Communicator configuration from the launcher's environment (vkg_comm_config_from_env): rank,
 * world size and local rank as the launchers set them (the order below, `launchers`), rank 0's
 * address and port, the job id and generation every rank derives alike, and the VKG_COMM_*
 * options. Reads the environment block it is given (or the process's); every malformed value is
 * an error naming the variable. Not here: the defaults, enum names and key files it relies on
 * (config.c).
 */
#include "comm_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *env_get(char *const *envp, const char *name)
{
    if (!envp)
        return getenv(name);
    size_t n = strlen(name);
    for (; *envp; envp++)
        if (!strncmp(*envp, name, n) && (*envp)[n] == '=')
            return *envp + n + 1;
    return NULL;
}

static vkg_status env_int(char *const *envp, const char *name, long lo, long hi, long *out)
{
    const char *v = env_get(envp, name);
    VKG_CHECK(v != NULL, VKG_ERR_INVALID_ARG, "%s is not set", name);
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    VKG_CHECK(*v && end && *end == '\0' && errno == 0 && x >= lo && x <= hi, VKG_ERR_INVALID_ARG,
              "%s='%s' is not an integer in [%ld, %ld]", name, v, lo, hi);
    *out = x;
    return VKG_OK;
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, then a splitmix64 finaliser */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h ? h : 1;
}

static uint64_t job_id_from(const char *s)
{
    size_t n = strlen(s);
    if (n == 16 && strspn(s, "0123456789abcdefABCDEF") == 16) {
        uint64_t v = strtoull(s, NULL, 16);
        if (v)
            return v;
    }
    return hash_str(s);
}

static vkg_status copy_str(char *dst, size_t cap, const char *name, const char *v)
{
    VKG_CHECK(strlen(v) < cap, VKG_ERR_INVALID_ARG, "%s is longer than %zu characters", name,
              cap - 1);
    snprintf(dst, cap, "%s", v);
    return VKG_OK;
}

typedef struct launcher_vars {
    vkg_comm_launcher id;
    const char *rank, *size, *local;
} launcher_vars;

/* The order of discovery (README, "Launchers"): the first launcher whose variables are set gives
 * rank and world. vkgpt's own first; then torchrun's (which Kubeflow's PyTorchJob and `vkgpt
 * launch` set too); Kubeflow's elastic PET_* without torchrun; the MPI launchers before Slurm,
 * since mpirun and mpiexec inside a Slurm allocation see the allocation's SLURM_* as well, but
 * their own variables name the process; Slurm's srun; a Kubernetes indexed Job or JobSet (its
 * completion index; the world size is the manifest's VKG_WORLD_SIZE); Flux. */
static const launcher_vars launchers[] = {
    {VKG_COMM_LAUNCH_VKGPT, "VKG_RANK", "VKG_WORLD_SIZE", "VKG_LOCAL_RANK"},
    {VKG_COMM_LAUNCH_TORCHRUN, "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {VKG_COMM_LAUNCH_KUBEFLOW, "PET_NODE_RANK", "PET_NNODES", NULL},
    {VKG_COMM_LAUNCH_OPENMPI, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK"},
    {VKG_COMM_LAUNCH_PMI, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {VKG_COMM_LAUNCH_SLURM, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    {VKG_COMM_LAUNCH_JOBSET, "JOB_COMPLETION_INDEX", "VKG_WORLD_SIZE", NULL},
    {VKG_COMM_LAUNCH_FLUX, "FLUX_TASK_RANK", "FLUX_JOB_SIZE", "FLUX_TASK_LOCAL_ID"},
};

/* The first host of a Slurm host list ("gpu[07-09,12],cpu1" -> "gpu07"; "rack[1-2]-n[01-04]" ->
 * "rack1-n01"): each bracket's first number or range start, as written (zero padding kept).
 * 0, or -1 when list is malformed or the name does not fit cap bytes. */
static int slurm_first_host(const char *list, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = list; *p && *p != ','; p++) {
        if (*p == ']')
            return -1;
        if (*p == '[') {
            p++;
            size_t digits = strspn(p, "0123456789");
            if (!digits)
                return -1;
            if (n + digits >= cap)
                return -1;
            memcpy(out + n, p, digits), n += digits;
            p += digits;
            const char *close = strchr(p, ']');
            if (!close || (*p != ']' && *p != '-' && *p != ','))
                return -1;
            p = close; /* the loop steps past it */
            continue;
        }
        if (n + 1 >= cap)
            return -1;
        out[n++] = *p;
    }
    if (!n)
        return -1;
    out[n] = '\0';
    return 0;
}

/* Is the whole job on this host, as far as the launcher tells? */
static int single_host(char *const *envp, vkg_comm_launcher l, int world)
{
    const char *v = NULL;
    if (l == VKG_COMM_LAUNCH_SLURM) {
        v = env_get(envp, "SLURM_NNODES");
        if (!v)
            v = env_get(envp, "SLURM_JOB_NUM_NODES");
        return v && !strcmp(v, "1");
    }
    if (l == VKG_COMM_LAUNCH_OPENMPI) {
        v = env_get(envp, "OMPI_COMM_WORLD_LOCAL_SIZE");
        return v && atoi(v) == world;
    }
    if (l == VKG_COMM_LAUNCH_TORCHRUN) {
        v = env_get(envp, "LOCAL_WORLD_SIZE");
        return v && atoi(v) == world;
    }
    if (l == VKG_COMM_LAUNCH_PMI) {
        v = env_get(envp, "MPI_LOCALNRANKS");
        return v && atoi(v) == world;
    }
    if (l == VKG_COMM_LAUNCH_FLUX) {
        v = env_get(envp, "FLUX_JOB_NNODES");
        return v && !strcmp(v, "1");
    }
    if (l == VKG_COMM_LAUNCH_KUBEFLOW || l == VKG_COMM_LAUNCH_JOBSET)
        return 0; /* a pod each */
    return 1;
}

static vkg_status env_launcher(vkg_comm_config *cfg, char *const *envp)
{
    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++) {
        const launcher_vars *L = &launchers[i];
        int has_r = env_get(envp, L->rank) != NULL, has_s = env_get(envp, L->size) != NULL;
        if (!has_r && !has_s)
            continue;
        /* an indexed Job's manifest gives VKG_WORLD_SIZE beside its completion index */
        if (L->id == VKG_COMM_LAUNCH_VKGPT && !has_r && env_get(envp, "JOB_COMPLETION_INDEX"))
            continue;
        VKG_CHECK(has_r && has_s, VKG_ERR_INVALID_ARG, "%s is set but %s is not (%s launcher)",
                  has_r ? L->rank : L->size, has_r ? L->size : L->rank,
                  vkg_comm_launcher_name(L->id));
        long r, n, lr = 0;
        const char *nn = env_get(envp, L->size);
        VKG_CHECK(L->id != VKG_COMM_LAUNCH_KUBEFLOW || !strchr(nn, ':'), VKG_ERR_INVALID_ARG,
                  "PET_NNODES='%s' is an elastic range: vkgpt needs a fixed number of nodes (set "
                  "the PyTorchJob's minReplicas and maxReplicas equal)",
                  nn);
        VKG_TRY(env_int(envp, L->size, 1, 1 << 20, &n));
        VKG_TRY(env_int(envp, L->rank, 0, n - 1, &r));
        if (L->local && env_get(envp, L->local))
            VKG_TRY(env_int(envp, L->local, 0, n - 1, &lr));
        const char *per = env_get(envp, "PET_NPROC_PER_NODE");
        VKG_CHECK(L->id != VKG_COMM_LAUNCH_KUBEFLOW || !per || !strcmp(per, "1"),
                  VKG_ERR_INVALID_ARG,
                  "PET_NPROC_PER_NODE='%s' without torchrun: vkgpt runs one rank per process, so "
                  "a pod without torchrun holds one (set nprocPerNode to 1, or start the pod's "
                  "ranks with torchrun)",
                  per);
        cfg->launcher = L->id;
        cfg->rank = (int)r;
        cfg->world_size = (int)n;
        cfg->local_rank = (int)lr;
        return VKG_OK;
    }
    return VKG_OK; /* no launcher: a single rank */
}

/* Rank 0's host from the Slurm step's (else the job's) node list: its first host. */
static vkg_status slurm_master(vkg_comm_config *cfg, char *const *envp, int *found)
{
    static const char *const lists[] = {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
                                        "SLURM_NODELIST"};
    *found = 0;
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        const char *v = env_get(envp, lists[i]);
        if (!v)
            continue;
        VKG_CHECK(slurm_first_host(v, cfg->master_addr, sizeof cfg->master_addr) == 0,
                  VKG_ERR_INVALID_ARG, "%s='%.200s' is not a Slurm host list", lists[i], v);
        *found = 1;
        return VKG_OK;
    }
    return VKG_OK;
}

static vkg_status env_master(vkg_comm_config *cfg, char *const *envp)
{
    const char *addr = env_get(envp, "MASTER_ADDR"), *addr_var = "MASTER_ADDR";
    if (!addr && cfg->launcher == VKG_COMM_LAUNCH_KUBEFLOW)
        addr = env_get(envp, "PET_MASTER_ADDR"), addr_var = "PET_MASTER_ADDR";
    int from_list = 0;
    if (!addr && cfg->launcher == VKG_COMM_LAUNCH_SLURM && cfg->world_size > 1 &&
        !single_host(envp, cfg->launcher, cfg->world_size))
        VKG_TRY(slurm_master(cfg, envp, &from_list));
    if (addr) {
        VKG_CHECK(*addr, VKG_ERR_INVALID_ARG, "%s is empty", addr_var);
        VKG_TRY(copy_str(cfg->master_addr, sizeof cfg->master_addr, addr_var, addr));
    } else if (!from_list) {
        VKG_CHECK(cfg->world_size == 1 || single_host(envp, cfg->launcher, cfg->world_size),
                  VKG_ERR_INVALID_ARG,
                  "MASTER_ADDR is not set and the %s job spans several hosts: set MASTER_ADDR to "
                  "rank 0's host",
                  vkg_comm_launcher_name(cfg->launcher));
    }
    const char *port_var = "MASTER_PORT";
    if (!env_get(envp, port_var) && cfg->launcher == VKG_COMM_LAUNCH_KUBEFLOW)
        port_var = "PET_MASTER_PORT";
    if (env_get(envp, port_var)) {
        long port;
        VKG_TRY(env_int(envp, port_var, 1, 65535, &port));
        cfg->master_port = (int)port;
        /* torchrun's agent on rank 0's host keeps its own store listening on MASTER_PORT when it
         * tells its workers to use it: take the next port */
        const char *agent = env_get(envp, "TORCHELASTIC_USE_AGENT_STORE");
        if (cfg->launcher == VKG_COMM_LAUNCH_TORCHRUN && agent && !strcmp(agent, "True")) {
            VKG_CHECK(port < 65535, VKG_ERR_INVALID_ARG,
                      "MASTER_PORT 65535 is torchrun's store and leaves no port after it");
            cfg->master_port = (int)port + 1;
        }
    } else if (cfg->launcher == VKG_COMM_LAUNCH_SLURM && env_get(envp, "SLURM_JOB_ID")) {
        /* one port per Slurm job, so jobs sharing a node do not collide */
        cfg->master_port = 20000 + (int)(strtoull(env_get(envp, "SLURM_JOB_ID"), NULL, 10) % 20000);
    }
    return VKG_OK;
}

static void env_job(vkg_comm_config *cfg, char *const *envp)
{
    char buf[512];
    const char *v = env_get(envp, "VKG_JOB_ID");
    if (v && *v) {
        cfg->job_id = job_id_from(v);
        return;
    }
    const char *a = NULL, *b = NULL;
    switch (cfg->launcher) {
    case VKG_COMM_LAUNCH_TORCHRUN:
        a = env_get(envp, "TORCHELASTIC_RUN_ID");
        if (a && !strcmp(a, "none"))
            a = NULL;
        break;
    case VKG_COMM_LAUNCH_SLURM:
        a = env_get(envp, "SLURM_JOB_ID");
        b = env_get(envp, "SLURM_STEP_ID");
        break;
    case VKG_COMM_LAUNCH_OPENMPI:
        a = env_get(envp, "OMPI_MCA_ess_base_jobid");
        if (!a)
            a = env_get(envp, "PMIX_NAMESPACE");
        break;
    case VKG_COMM_LAUNCH_FLUX:
        a = env_get(envp, "FLUX_JOB_ID");
        break;
    case VKG_COMM_LAUNCH_JOBSET:
        a = env_get(envp, "JOBSET_NAME");
        break;
    default:
        break;
    }
    if (a)
        snprintf(buf, sizeof buf, "%s:%s.%s", vkg_comm_launcher_name(cfg->launcher), a, b ? b : "");
    else
        snprintf(buf, sizeof buf, "%s:%s:%d:%d", vkg_comm_launcher_name(cfg->launcher),
                 cfg->master_addr, cfg->master_port, cfg->world_size);
    cfg->job_id = hash_str(buf);
}

static vkg_status env_options(vkg_comm_config *cfg, char *const *envp)
{
    const char *v;
    long g;
    if (env_get(envp, "VKG_COMM_GENERATION")) {
        VKG_TRY(env_int(envp, "VKG_COMM_GENERATION", 0, INT_MAX, &g));
        cfg->generation = (uint32_t)g;
    } else if (env_get(envp, "TORCHELASTIC_RESTART_COUNT")) {
        VKG_TRY(env_int(envp, "TORCHELASTIC_RESTART_COUNT", 0, INT_MAX, &g));
        cfg->generation = (uint32_t)g;
    }
    if ((v = env_get(envp, "VKG_COMM_TRANSPORT"))) {
        vkg_status st = vkg_comm_transport_select(v, &cfg->transport, &cfg->shm);
        if (st < 0)
            return vkg__error_wrap(st, "VKG_COMM_TRANSPORT");
        VKG_CHECK(cfg->transport != VKG_COMM_INPROC, VKG_ERR_INVALID_ARG,
                  "VKG_COMM_TRANSPORT=inproc: inproc ranks are threads of one process and are "
                  "configured in code; use tcp or ipc");
    }
    if ((v = env_get(envp, "VKG_COMM_TIMEOUT"))) {
        char *end = NULL;
        double s = strtod(v, &end);
        VKG_CHECK(*v && *end == '\0' && s > 0 && s < 86400 * 7, VKG_ERR_INVALID_ARG,
                  "VKG_COMM_TIMEOUT='%s' is not a number of seconds > 0", v);
        cfg->timeout_ms = (int)(s * 1000 + 0.5) > 0 ? (int)(s * 1000 + 0.5) : 1;
    }
    if ((v = env_get(envp, "VKG_COMM_IPC_DIR")))
        VKG_TRY(copy_str(cfg->ipc_dir, sizeof cfg->ipc_dir, "VKG_COMM_IPC_DIR", v));
    if ((v = env_get(envp, "VKG_COMM_LISTEN_ALL"))) {
        VKG_CHECK(!strcmp(v, "0") || !strcmp(v, "1"), VKG_ERR_INVALID_ARG,
                  "VKG_COMM_LISTEN_ALL must be 0 or 1, got '%.40s'", v);
        cfg->listen_all = v[0] == '1';
    }
    if ((v = env_get(envp, "VKG_COMM_BIND_ADDR")))
        VKG_TRY(copy_str(cfg->bind_addr, sizeof cfg->bind_addr, "VKG_COMM_BIND_ADDR", v));
    if ((v = env_get(envp, "VKG_COMM_CURVE_KEY"))) {
        vkg_status st = vkg_comm_keyfile_read(v, cfg->curve_public, cfg->curve_secret);
        if (st < 0)
            return vkg__error_wrap(st, "VKG_COMM_CURVE_KEY");
        VKG_CHECK(cfg->curve_secret[0], VKG_ERR_INVALID_ARG,
                  "VKG_COMM_CURVE_KEY=%s holds no secret key (a .pub file?)", v);
    }
    if ((v = env_get(envp, "VKG_COMM_CURVE_AUTHORIZED")))
        VKG_TRY(copy_str(cfg->curve_authorized_file, sizeof cfg->curve_authorized_file,
                         "VKG_COMM_CURVE_AUTHORIZED", v));
    return VKG_OK;
}

vkg_status vkg_comm_config_from_env(vkg_comm_config *cfg, char *const *envp)
{
    VKG_CHECK(cfg != NULL, VKG_ERR_INVALID_ARG, "cfg is NULL");
    vkg_comm_config_default(cfg);
    VKG_TRY(env_launcher(cfg, envp));
    VKG_TRY(env_master(cfg, envp));
    env_job(cfg, envp);
    return env_options(cfg, envp);
}
