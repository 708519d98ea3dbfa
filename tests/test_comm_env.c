/* Communicator configuration without sockets: launcher environments (vkgpt's, torchrun, Kubeflow,
 * Open MPI, MPICH's PMI, Slurm with its host lists, Kubernetes indexed Jobs, Flux, none) and their
 * order, their error messages, job ids, options, transport names, and CURVE key files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "vkgpt/comm.h"

static void test_no_launcher_is_single_rank(void **state)
{
    (void)state;
    char *env[] = {"HOME=/root", NULL};
    vkg_comm_config cfg;
    assert_int_equal(vkg_comm_config_from_env(&cfg, env), VKG_OK);
    assert_int_equal(cfg.world_size, 1);
    assert_int_equal(cfg.rank, 0);
    assert_int_equal(cfg.launcher, VKG_COMM_LAUNCH_NONE);
    assert_int_equal(cfg.timeout_ms, 60000);
    assert_int_equal(cfg.transport, VKG_COMM_TCP);
}

static void test_torchrun(void **state)
{
    (void)state;
    char *env[] = {"RANK=3", "WORLD_SIZE=8", "LOCAL_RANK=1", "MASTER_ADDR=10.1.2.3",
                   "MASTER_PORT=29501", "TORCHELASTIC_RUN_ID=abc", "TORCHELASTIC_RESTART_COUNT=2",
                   /* present but ignored: torchrun comes first */
                   "SLURM_PROCID=0", "SLURM_NTASKS=1", NULL};
    vkg_comm_config cfg;
    assert_int_equal(vkg_comm_config_from_env(&cfg, env), VKG_OK);
    assert_int_equal(cfg.launcher, VKG_COMM_LAUNCH_TORCHRUN);
    assert_int_equal(cfg.rank, 3);
    assert_int_equal(cfg.world_size, 8);
    assert_int_equal(cfg.local_rank, 1);
    assert_string_equal(cfg.master_addr, "10.1.2.3");
    assert_int_equal(cfg.master_port, 29501);
    assert_int_equal(cfg.generation, 2);
    uint64_t job = cfg.job_id;
    assert_true(job != 0 && job != 1);
    /* the same run id gives the same job on another rank; another run id another job */
    char *env2[] = {"RANK=0",
                    "WORLD_SIZE=8",
                    "MASTER_ADDR=10.1.2.3",
                    "MASTER_PORT=29501",
                    "TORCHELASTIC_RUN_ID=abc",
                    NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, env2), VKG_OK);
    assert_true(cfg.job_id == job);
    char *env3[] = {"RANK=0",
                    "WORLD_SIZE=8",
                    "MASTER_ADDR=10.1.2.3",
                    "MASTER_PORT=29501",
                    "TORCHELASTIC_RUN_ID=abd",
                    NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, env3), VKG_OK);
    assert_true(cfg.job_id != job);
    /* torchrun's agent keeps its store on MASTER_PORT for its workers: rank 0 takes the next */
    char *agent[] = {"RANK=0",
                     "WORLD_SIZE=2",
                     "MASTER_ADDR=10.1.2.3",
                     "MASTER_PORT=29500",
                     "TORCHELASTIC_USE_AGENT_STORE=True",
                     NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, agent), VKG_OK);
    assert_int_equal(cfg.master_port, 29501);
    agent[4] = "TORCHELASTIC_USE_AGENT_STORE=False";
    assert_int_equal(vkg_comm_config_from_env(&cfg, agent), VKG_OK);
    assert_int_equal(cfg.master_port, 29500);
    agent[3] = "MASTER_PORT=65535", agent[4] = "TORCHELASTIC_USE_AGENT_STORE=True";
    assert_int_equal(vkg_comm_config_from_env(&cfg, agent), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "MASTER_PORT 65535"));
}

static void test_slurm(void **state)
{
    (void)state;
    char *env[] = {"SLURM_PROCID=5",
                   "SLURM_NTASKS=6",
                   "SLURM_LOCALID=2",
                   "SLURM_NNODES=1",
                   "SLURM_JOB_ID=4242",
                   "SLURM_STEP_ID=0",
                   NULL};
    vkg_comm_config cfg;
    assert_int_equal(vkg_comm_config_from_env(&cfg, env), VKG_OK);
    assert_int_equal(cfg.launcher, VKG_COMM_LAUNCH_SLURM);
    assert_int_equal(cfg.rank, 5);
    assert_int_equal(cfg.world_size, 6);
    assert_int_equal(cfg.local_rank, 2);
    assert_string_equal(cfg.master_addr, "127.0.0.1"); /* one node: loopback */
    assert_int_equal(cfg.master_port, 20000 + 4242);   /* derived from the job id */
    /* several nodes and no MASTER_ADDR: a clear error naming the variable */
    char *env2[] = {"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_NNODES=2", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, env2), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "MASTER_ADDR"));
    char *env3[] = {"SLURM_PROCID=0",     "SLURM_NTASKS=4",   "SLURM_NNODES=2",
                    "MASTER_ADDR=node01", "MASTER_PORT=7000", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, env3), VKG_OK);
    assert_string_equal(cfg.master_addr, "node01");
    assert_int_equal(cfg.master_port, 7000);
}

/* Rank 0's host from the Slurm node list when the job spans nodes and MASTER_ADDR is not set: the
 * step's list before the job's, the first host as written; a malformed list is refused by name. */
static void test_slurm_node_list(void **state)
{
    (void)state;
    static const struct {
        const char *list, *first;
    } cases[] = {
        {"gpu[07-09,12],cpu1", "gpu07"},
        {"node1,node2", "node1"},
        {"rack[1-2]-n[01-04]", "rack1-n01"},
        {"a[003]", "a003"},
        {"solo", "solo"},
    };
    vkg_comm_config cfg;
    char list[128];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(list, sizeof list, "SLURM_JOB_NODELIST=%s", cases[i].list);
        char *env[] = {"SLURM_PROCID=3", "SLURM_NTASKS=4", "SLURM_NNODES=2", list, NULL};
        assert_int_equal(vkg_comm_config_from_env(&cfg, env), VKG_OK);
        assert_string_equal(cfg.master_addr, cases[i].first);
    }
    char *step[] = {"SLURM_PROCID=0",
                    "SLURM_NTASKS=4",
                    "SLURM_NNODES=2",
                    "SLURM_JOB_NODELIST=big[1-8]",
                    "SLURM_STEP_NODELIST=big[5-6]",
                    NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, step), VKG_OK);
    assert_string_equal(cfg.master_addr, "big5");
    char *given[] = {"SLURM_PROCID=0",   "SLURM_NTASKS=4",
                     "SLURM_NNODES=2",   "SLURM_JOB_NODELIST=big[1-8]",
                     "MASTER_ADDR=head", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, given), VKG_OK);
    assert_string_equal(cfg.master_addr, "head");
    static const char *const bad[] = {"gpu[x-1]", "gpu[1-2", "]x", "", "[", "gpu]1["};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(list, sizeof list, "SLURM_JOB_NODELIST=%s", bad[i]);
        char *env[] = {"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_NNODES=2", list, NULL};
        assert_int_equal(vkg_comm_config_from_env(&cfg, env), VKG_ERR_INVALID_ARG);
        assert_non_null(strstr(vkg_error_message(), "SLURM_JOB_NODELIST"));
    }
}

/* Kubeflow's PyTorchJob without torchrun (PET_*), MPICH's PMI, a Kubernetes indexed Job and
 * Flux: rank, world, local rank and rank 0's address from their variables, and the refusals that
 * name what is wrong. */
static void test_other_launchers(void **state)
{
    (void)state;
    vkg_comm_config cfg;
    char *pet[] = {"PET_NODE_RANK=2",       "PET_NNODES=3",
                   "PET_NPROC_PER_NODE=1",  "PET_MASTER_ADDR=job-master-0",
                   "PET_MASTER_PORT=23456", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, pet), VKG_OK);
    assert_int_equal(cfg.launcher, VKG_COMM_LAUNCH_KUBEFLOW);
    assert_true(cfg.rank == 2 && cfg.world_size == 3 && cfg.local_rank == 0);
    assert_string_equal(cfg.master_addr, "job-master-0");
    assert_int_equal(cfg.master_port, 23456);
    char *pet_range[] = {"PET_NODE_RANK=0", "PET_NNODES=1:4", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, pet_range), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "PET_NNODES='1:4' is an elastic range"));
    char *pet_many[] = {"PET_NODE_RANK=0", "PET_NNODES=2", "PET_NPROC_PER_NODE=4",
                        "PET_MASTER_ADDR=m", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, pet_many), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "PET_NPROC_PER_NODE='4'"));

    char *pmi[] = {"PMI_RANK=3", "PMI_SIZE=4", "MPI_LOCALRANKID=3", "MPI_LOCALNRANKS=4", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, pmi), VKG_OK);
    assert_int_equal(cfg.launcher, VKG_COMM_LAUNCH_PMI);
    assert_true(cfg.rank == 3 && cfg.world_size == 4 && cfg.local_rank == 3);
    assert_string_equal(cfg.master_addr, "127.0.0.1"); /* every rank on this host */
    char *pmi_hosts[] = {"PMI_RANK=0", "PMI_SIZE=4", "MPI_LOCALNRANKS=2", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, pmi_hosts), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "MASTER_ADDR is not set and the pmi job"));

    char *job[] = {"JOB_COMPLETION_INDEX=5", "VKG_WORLD_SIZE=8", "JOBSET_NAME=train",
                   "MASTER_ADDR=train-workers-0-0.train", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, job), VKG_OK);
    assert_int_equal(cfg.launcher, VKG_COMM_LAUNCH_JOBSET);
    assert_true(cfg.rank == 5 && cfg.world_size == 8);
    assert_string_equal(cfg.master_addr, "train-workers-0-0.train");
    char *job_nosize[] = {"JOB_COMPLETION_INDEX=5", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, job_nosize), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "VKG_WORLD_SIZE"));
    char *job_noaddr[] = {"JOB_COMPLETION_INDEX=1", "VKG_WORLD_SIZE=2", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, job_noaddr), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "MASTER_ADDR is not set and the jobset job"));

    char *flux[] = {"FLUX_TASK_RANK=1",  "FLUX_JOB_SIZE=2",  "FLUX_TASK_LOCAL_ID=1",
                    "FLUX_JOB_NNODES=1", "FLUX_JOB_ID=f2x9", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, flux), VKG_OK);
    assert_int_equal(cfg.launcher, VKG_COMM_LAUNCH_FLUX);
    assert_true(cfg.rank == 1 && cfg.world_size == 2 && cfg.local_rank == 1);
    vkg_comm_config other;
    char *flux2[] = {"FLUX_TASK_RANK=0", "FLUX_JOB_SIZE=2", "FLUX_JOB_NNODES=1", "FLUX_JOB_ID=f2x9",
                     NULL};
    assert_int_equal(vkg_comm_config_from_env(&other, flux2), VKG_OK);
    assert_true(other.job_id == cfg.job_id); /* both ranks derive the job's id alike */
}

/* The order of discovery: vkgpt's own variables before torchrun's, torchrun's and the MPI
 * launchers' before the Slurm allocation's they run inside, Open MPI's before PMI's. */
static void test_launcher_order(void **state)
{
    (void)state;
    vkg_comm_config cfg;
    char *own[] = {"VKG_RANK=1", "VKG_WORLD_SIZE=2", "RANK=0", "WORLD_SIZE=4", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, own), VKG_OK);
    assert_true(cfg.launcher == VKG_COMM_LAUNCH_VKGPT && cfg.rank == 1 && cfg.world_size == 2);
    char *torch[] = {"RANK=3",         "WORLD_SIZE=4",   "LOCAL_WORLD_SIZE=4",
                     "SLURM_PROCID=0", "SLURM_NTASKS=1", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, torch), VKG_OK);
    assert_true(cfg.launcher == VKG_COMM_LAUNCH_TORCHRUN && cfg.rank == 3);
    char *mpi[] = {"OMPI_COMM_WORLD_RANK=2",
                   "OMPI_COMM_WORLD_SIZE=3",
                   "OMPI_COMM_WORLD_LOCAL_SIZE=3",
                   "PMI_RANK=0",
                   "PMI_SIZE=1",
                   "SLURM_PROCID=0",
                   "SLURM_NTASKS=1",
                   NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, mpi), VKG_OK);
    assert_true(cfg.launcher == VKG_COMM_LAUNCH_OPENMPI && cfg.rank == 2);
    char *pmi[] = {"PMI_RANK=1",     "PMI_SIZE=2",     "MPI_LOCALNRANKS=2",
                   "SLURM_PROCID=0", "SLURM_NTASKS=1", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, pmi), VKG_OK);
    assert_true(cfg.launcher == VKG_COMM_LAUNCH_PMI && cfg.rank == 1);
}

static void test_openmpi(void **state)
{
    (void)state;
    char *env[] = {"OMPI_COMM_WORLD_RANK=1",       "OMPI_COMM_WORLD_SIZE=4",
                   "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=4",
                   "OMPI_MCA_ess_base_jobid=77",   NULL};
    vkg_comm_config cfg;
    assert_int_equal(vkg_comm_config_from_env(&cfg, env), VKG_OK);
    assert_int_equal(cfg.launcher, VKG_COMM_LAUNCH_OPENMPI);
    assert_int_equal(cfg.rank, 1);
    assert_int_equal(cfg.world_size, 4);
    assert_int_equal(cfg.local_rank, 1);
    assert_string_equal(cfg.master_addr, "127.0.0.1");
    assert_int_equal(cfg.master_port, 29500);
}

static void test_env_errors_name_the_variable(void **state)
{
    (void)state;
    vkg_comm_config cfg;
    char *half[] = {"RANK=1", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, half), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "WORLD_SIZE"));
    char *bad[] = {"RANK=x1", "WORLD_SIZE=2", "MASTER_ADDR=h", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, bad), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "RANK='x1'"));
    char *range[] = {"RANK=2", "WORLD_SIZE=2", "MASTER_ADDR=h", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, range), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "RANK='2'"));
    char *port[] = {"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=70000", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, port), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "MASTER_PORT"));
    char *tr[] = {"VKG_COMM_TRANSPORT=udp", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, tr), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "tcp, ipc"));
    char *inproc[] = {"VKG_COMM_TRANSPORT=inproc", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, inproc), VKG_ERR_INVALID_ARG);
    char *to[] = {"VKG_COMM_TIMEOUT=-3", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, to), VKG_ERR_INVALID_ARG);
    assert_non_null(strstr(vkg_error_message(), "VKG_COMM_TIMEOUT"));
}

static void test_env_options(void **state)
{
    (void)state;
    vkg_comm_config cfg;
    char *env[] = {"VKG_RANK=1",
                   "VKG_WORLD_SIZE=3",
                   "VKG_JOB_ID=00000000deadbeef",
                   "VKG_COMM_TRANSPORT=ipc",
                   "VKG_COMM_TIMEOUT=2.5",
                   "VKG_COMM_IPC_DIR=/tmp/x",
                   "VKG_COMM_BIND_ADDR=127.0.0.2",
                   "VKG_COMM_GENERATION=7",
                   NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, env), VKG_OK);
    assert_int_equal(cfg.launcher, VKG_COMM_LAUNCH_VKGPT);
    assert_int_equal(cfg.rank, 1);
    assert_int_equal(cfg.world_size, 3);
    assert_true(cfg.job_id == 0xdeadbeefull);
    assert_int_equal(cfg.transport, VKG_COMM_IPC);
    assert_int_equal(cfg.timeout_ms, 2500);
    assert_string_equal(cfg.ipc_dir, "/tmp/x");
    assert_string_equal(cfg.bind_addr, "127.0.0.2");
    assert_int_equal(cfg.generation, 7);
    /* a non-hex job id is hashed, the same on every rank */
    char *named[] = {"VKG_JOB_ID=my-run", NULL};
    assert_int_equal(vkg_comm_config_from_env(&cfg, named), VKG_OK);
    uint64_t a = cfg.job_id;
    assert_int_equal(vkg_comm_config_from_env(&cfg, named), VKG_OK);
    assert_true(a == cfg.job_id && a != 0);
}

static void test_transport_names(void **state)
{
    (void)state;
    vkg_comm_transport t;
    assert_int_equal(vkg_comm_transport_parse("inproc", &t), VKG_OK);
    assert_int_equal(t, VKG_COMM_INPROC);
    assert_int_equal(vkg_comm_transport_parse("ipc", &t), VKG_OK);
    assert_int_equal(t, VKG_COMM_IPC);
    assert_int_equal(vkg_comm_transport_parse("TCP", &t), VKG_ERR_INVALID_ARG);
    assert_string_equal(vkg_comm_transport_name(VKG_COMM_TCP), "tcp");
    assert_int_equal(vkg_comm_dtype_size(VKG_COMM_BF16), 2);
    assert_int_equal(vkg_comm_dtype_size(VKG_COMM_F32), 4);
}

static void test_keyfile_roundtrip(void **state)
{
    (void)state;
    if (!vkg_comm_has_curve())
        skip();
    char dir[] = "/tmp/vkg-keytest-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128], pubpath[160];
    snprintf(path, sizeof path, "%s/job.key", dir);
    snprintf(pubpath, sizeof pubpath, "%s.pub", path);
    char pub[41], sec[41], pub2[41], sec2[41];
    assert_int_equal(vkg_comm_curve_keypair(pub, sec), VKG_OK);
    assert_int_equal(strlen(pub), 40);
    assert_int_equal(vkg_comm_keyfile_write(path, pub, sec), VKG_OK);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    /* never overwrite */
    assert_int_equal(vkg_comm_keyfile_write(path, pub, sec), VKG_ERR_IO);
    assert_int_equal(vkg_comm_keyfile_read(path, pub2, sec2), VKG_OK);
    assert_string_equal(pub, pub2);
    assert_string_equal(sec, sec2);
    assert_int_equal(vkg_comm_keyfile_read(pubpath, pub2, sec2), VKG_OK);
    assert_string_equal(pub, pub2);
    assert_string_equal(sec2, "");
    /* the key file through the environment */
    char var[200];
    snprintf(var, sizeof var, "VKG_COMM_CURVE_KEY=%s", path);
    char *env[] = {var, NULL};
    vkg_comm_config cfg;
    assert_int_equal(vkg_comm_config_from_env(&cfg, env), VKG_OK);
    assert_string_equal(cfg.curve_public, pub);
    assert_string_equal(cfg.curve_secret, sec);
    snprintf(var, sizeof var, "VKG_COMM_CURVE_KEY=%s", pubpath);
    assert_int_equal(vkg_comm_config_from_env(&cfg, env), VKG_ERR_INVALID_ARG);
    /* a corrupted file is rejected with its name and line */
    FILE *f = fopen(path, "a");
    fputs("secret = tooshort\n", f);
    fclose(f);
    assert_int_equal(vkg_comm_keyfile_read(path, pub2, sec2), VKG_ERR_FORMAT);
    assert_non_null(strstr(vkg_error_message(), "job.key:4"));
    unlink(path);
    unlink(pubpath);
    rmdir(dir);
}

/* Key files that are not small regular files are refused at once, without reading them:
 * /dev/zero (read forever before), a FIFO with no writer (blocked forever), a folder, a huge
 * file; also through the environment. */
static void test_keyfile_not_a_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/vkg-keytest-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char fifo[128], big[128], var[200];
    snprintf(fifo, sizeof fifo, "%s/fifo.key", dir);
    snprintf(big, sizeof big, "%s/big.key", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    FILE *f = fopen(big, "w");
    assert_non_null(f);
    assert_int_equal(fseek(f, 1 << 20, SEEK_SET), 0);
    fputc('\n', f);
    fclose(f);
    const struct {
        const char *path, *needle;
        vkg_status st;
    } cases[] = {{"/dev/zero", "not a regular file: a character device", VKG_ERR_IO},
                 {fifo, "not a regular file: a FIFO", VKG_ERR_IO},
                 {dir, "not a regular file: a directory", VKG_ERR_IO},
                 {big, "more than such a file holds", VKG_ERR_FORMAT}};
    char pub[41], sec[41];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(vkg_comm_keyfile_read(cases[i].path, pub, sec), cases[i].st);
        assert_non_null(strstr(vkg_error_message(), cases[i].needle));
        assert_non_null(strstr(vkg_error_message(), cases[i].path));
        snprintf(var, sizeof var, "VKG_COMM_CURVE_KEY=%s", cases[i].path);
        char *env[] = {var, NULL};
        vkg_comm_config cfg;
        assert_int_equal(vkg_comm_config_from_env(&cfg, env), cases[i].st);
        assert_non_null(strstr(vkg_error_message(), "VKG_COMM_CURVE_KEY"));
    }
    unlink(fifo);
    unlink(big);
    rmdir(dir);
}

static void test_single_rank_collectives(void **state)
{
    (void)state;
    vkg_comm_config cfg;
    vkg_comm_config_default(&cfg);
    vkg_comm_t *c = NULL;
    assert_int_equal(vkg_comm_create(&cfg, &c), VKG_OK);
    assert_int_equal(vkg_comm_size(c), 1);
    float x[5] = {1, 2, 3, 4, 5}, y[5] = {0};
    assert_int_equal(vkg_comm_allreduce(c, x, y, 5, VKG_COMM_F32, VKG_COMM_AVG), VKG_OK);
    assert_memory_equal(x, y, sizeof x);
    assert_int_equal(vkg_comm_allreduce(c, x, x, 0, VKG_COMM_F32, VKG_COMM_SUM), VKG_OK);
    assert_int_equal(vkg_comm_broadcast(c, x, sizeof x, 0), VKG_OK);
    assert_int_equal(vkg_comm_broadcast(c, x, sizeof x, 1), VKG_ERR_INVALID_ARG);
    assert_int_equal(vkg_comm_allgather(c, x, sizeof x, y), VKG_OK);
    assert_memory_equal(x, y, sizeof x);
    assert_int_equal(vkg_comm_barrier(c), VKG_OK);
    assert_int_equal(vkg_comm_send(c, 0, 1, x, 4), VKG_ERR_INVALID_ARG);
    assert_int_equal(vkg_comm_allreduce(c, x, x + 1, 3, VKG_COMM_F32, VKG_COMM_SUM),
                     VKG_ERR_INVALID_ARG);
    vkg_comm_destroy(&c);
    assert_null(c);
    vkg_comm_destroy(&c); /* NULL-safe */
}

/* Rank 0's host name that never resolves (.invalid, RFC 6761) is asked again until the job's
 * deadline, not refused at once (a pod's DNS record appears late), and then refused naming it. */
static void test_master_name_waits_then_fails(void **state)
{
    (void)state;
    vkg_comm_config cfg;
    vkg_comm_config_default(&cfg);
    cfg.transport = VKG_COMM_TCP;
    cfg.world_size = 2, cfg.rank = 1;
    snprintf(cfg.master_addr, sizeof cfg.master_addr, "rank0.vkgpt-test.invalid");
    cfg.master_port = 29999;
    cfg.timeout_ms = 1500;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    vkg_comm_t *c = NULL;
    assert_int_equal(vkg_comm_create(&cfg, &c), VKG_ERR_NETWORK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("    refused after %.2f s: %s\n", s, vkg_error_message());
    assert_true(s >= 1.4 && s < 30.0);
    assert_non_null(strstr(vkg_error_message(), "'rank0.vkgpt-test.invalid'"));
    assert_non_null(strstr(vkg_error_message(), "at the job's deadline"));
    assert_null(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_launcher_is_single_rank),
        cmocka_unit_test(test_torchrun),
        cmocka_unit_test(test_slurm),
        cmocka_unit_test(test_openmpi),
        cmocka_unit_test(test_slurm_node_list),
        cmocka_unit_test(test_other_launchers),
        cmocka_unit_test(test_launcher_order),
        cmocka_unit_test(test_env_errors_name_the_variable),
        cmocka_unit_test(test_env_options),
        cmocka_unit_test(test_transport_names),
        cmocka_unit_test(test_keyfile_roundtrip),
        cmocka_unit_test(test_keyfile_not_a_file),
        cmocka_unit_test(test_single_rank_collectives),
        cmocka_unit_test(test_master_name_waits_then_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
