/* Device tuning (ops/tuning.h): the kernel variants, tiles and workgroup sizes the ops use on a
 * device, chosen once from the capabilities its runtime publishes when the first op asks, read by
 * the ops and replaceable by benchmarks. It does not measure anything: the choices below come
 * from docs/BENCHMARKS.md. */
#include <stdatomic.h>
#include <stdlib.h>

#include "ops/tuning.h"

/* Matmul on CPU devices: one subgroup per workgroup, as many rows as lanes so A is loaded once
 * per k and broadcast, 8 columns per lane (measured best of 8x1..8x16). GPUs: 64 lanes, 4 x 4.
 * K-split on CPU devices: half of a 1 MiB L2, so a chunk of B, A's rows and the output tile stay
 * cached while the row blocks stream past (the classifier's dinp at L=4 C=256 V=50257 B=8 T=128:
 * 2.5-5 s -> 0.75-0.85 s; 256 KiB to 1 MiB did about as well); GPUs were not measured.
 * The reductions (layernorm, xent, encoder_bwd_wte, sumsq): CPU devices run a workgroup on one
 * core where every barrier switches through all its subgroups, so fewer lanes (fewer tree levels)
 * serve them (sumsq's chunks are not the tuning's: src/ops/norm.c).
 * The bias and layernorm-parameter gradients: CPU devices keep the serial column sums (and their
 * bits: the default lavapipe run is unchanged); GPUs cut the B*T rows into 16 chunks summed in
 * parallel (a workgroup of 16 columns x 16 chunks), the chunk sums added in order.
 * The tiled matmul (GPUs; not measured on one yet): its tiles, by vendor and product size, come
 * from the table in src/ops/mmt.c (the "other" vendor's row here; the device's first op applies
 * its own vendor's). On lavapipe every load is a gather and shared memory is ordinary memory
 * behind barriers that switch through the workgroup's subgroups: the register kernel stays. */
vkg_device_tuning vkg__device_tuning_defaults(VkPhysicalDeviceType type, uint32_t subgroup_size)
{
    int cpu = type == VK_PHYSICAL_DEVICE_TYPE_CPU;
    vkg_device_tuning t = {
        .matmul_tm = 4,
        .matmul_tn = 4,
        .matmul_lx = 64,
        .matmul_ksplit_bytes = cpu ? 512u * 1024u : 0u,
        .matmul_tiled = cpu ? 0u : 1u,
        .attention = cpu ? VKG_ATTENTION_DIRECT : VKG_ATTENTION_SHARED,
        .layernorm_wg = cpu ? 32u : 256u,
        .xent_wg_max = cpu ? 64u : 256u,
        .encoder_wte_wg = cpu ? 64u : 256u,
        .sumsq_wg = cpu ? 64u : 256u,
        .grad_reduce_chunks = cpu ? 0u : 16u,
        .coopmat_m = 16, /* coopmat off; the emulation's fragment shape */
        .coopmat_n = 8,
        .coopmat_k = 16,
    };
    vkg__mmt_defaults(0, type, &t);
    if (cpu && subgroup_size > 0 && subgroup_size <= 16) {
        t.matmul_tm = subgroup_size;
        t.matmul_tn = 8;
        t.matmul_lx = subgroup_size;
    }
    return t;
}

/* The cooperative-matrix fields for dev's mode and the configuration it was opened with. */
static void coopmat_tune(const vkg_device_t *dev, vkg_device_tuning *t)
{
    t->coopmat = 0, t->coopmat_all = 0, t->coopmat_grads = 0;
    t->coopmat_m = 16, t->coopmat_n = 8, t->coopmat_k = 16; /* the emulation's default shape */
    if (dev->opts.coopmat == VKG_COOPMAT_EMULATE)
        t->coopmat = 2;
    if ((dev->opts.coopmat == VKG_COOPMAT_ON || dev->opts.coopmat == VKG_COOPMAT_AUTO) &&
        dev->coopmat_config >= 0) {
        const vkg_coopmat_config *c = &dev->info.coopmat[dev->coopmat_config];
        t->coopmat = 1;
        t->coopmat_m = c->m, t->coopmat_n = c->n, t->coopmat_k = c->k;
    }
}

/* The tuning dev starts from: its type's defaults, its vendor's row of the tiled matmul's table
 * fitted to its limits, and the cooperative-matrix kernel where it was opened with it. */
static vkg_device_tuning initial(const vkg_device_t *dev)
{
    vkg_device_tuning t = vkg__device_tuning_defaults(dev->tune_type, dev->info.subgroup_size);
    vkg__mmt_defaults(dev->tune_vendor, dev->tune_type, &t);
    vkg__mmt_fit(dev, &t);
    coopmat_tune(dev, &t);
    return t;
}

/* dev's tuning, made on first use (NULL only without memory for it). Devices are used from one
 * thread at a time, but a device's first two uses may still race from two threads: the loser's
 * copy, equal to the winner's, is dropped. */
static vkg_device_tuning *tuning_of(const vkg_device_t *dev)
{
    vkg_device_t *d = (vkg_device_t *)dev; /* the slot is the ops' to fill, whatever the caller */
    vkg_device_tuning *t = atomic_load(&d->tuning);
    if (t)
        return t;
    vkg_device_tuning *fresh = malloc(sizeof *fresh);
    if (!fresh)
        return NULL;
    *fresh = initial(dev);
    if (atomic_compare_exchange_strong(&d->tuning, &t, fresh))
        return fresh;
    free(fresh);
    return t;
}

vkg_device_tuning vkg_device_tuning_get(const vkg_device_t *dev)
{
    const vkg_device_tuning *t = tuning_of(dev);
    return t ? *t : initial(dev);
}

_Static_assert(VKG_MMT_SIZES == sizeof((vkg_matmul_choice){0}.tiles) / sizeof(vkg_matmul_tiling),
               "vkg_matmul_choice holds one tiling per size of product");

typedef struct field_range {
    const char *name;
    uint32_t value, min, max;
    int pow2;
} field_range;

/* Each field within its range, and a power of two where marked; `what` prefixes the field's name
 * in the error ("" or "the tiled matmul's small tile's "). */
static vkg_status check_fields(const vkg_device_t *dev, const char *what, const field_range *f,
                               size_t n)
{
    for (size_t i = 0; i < n; i++) {
        VKG_CHECK(f[i].value >= f[i].min && f[i].value <= f[i].max, VKG_ERR_INVALID_ARG,
                  "device tuning: %s%s = %u is outside [%u, %u] on %s", what, f[i].name, f[i].value,
                  f[i].min, f[i].max, dev->info.name);
        VKG_CHECK(!f[i].pow2 || (f[i].value & (f[i].value - 1)) == 0, VKG_ERR_INVALID_ARG,
                  "device tuning: %s%s = %u is not a power of two", what, f[i].name, f[i].value);
    }
    return VKG_OK;
}

static uint32_t mmt_threads(const vkg_matmul_tiling *m)
{
    return (m->bm / m->tm) * (m->bn / m->tn);
}

size_t vkg_matmul_tiling_smem(const vkg_matmul_tiling *m)
{
    /* matmul_tiled.comp's As and Bs, twice over when double buffered */
    return (size_t)m->bk * (m->bm + 1 + m->bn + 1) * 4 * (m->dbuf ? 2 : 1);
}

static int mmt_fits(const vkg_device_t *dev, const vkg_matmul_tiling *m)
{
    return mmt_threads(m) <= dev->info.max_workgroup_invocations &&
           vkg_matmul_tiling_smem(m) <= dev->info.max_shared_memory;
}

void vkg__mmt_fit(const vkg_device_t *dev, vkg_device_tuning *t)
{
    static const vkg_matmul_tiling least = {16, 16, 16, 2, 2, 0, 0}; /* 64 invocations, 2 KiB */
    for (int i = 0; i < VKG_MMT_SIZES; i++) { /* single buffered where only that fits */
        vkg_matmul_tiling one = t->mmt[i];
        one.dbuf = 0;
        if (t->mmt[i].dbuf && !mmt_fits(dev, &t->mmt[i]) && mmt_fits(dev, &one)) {
            t->mmt[i] = one;
            t->mmt_dbuf_dropped |= 1u << i;
        }
    }
    for (int i = VKG_MMT_SIZES - 1; i >= 0; i--) {
        int j = i;
        while (j >= 0 && !mmt_fits(dev, &t->mmt[j]))
            j--;
        t->mmt[i] = j >= 0 ? t->mmt[j] : least;
    }
}

/* The tiled matmul's tiles of size class i fit the kernel and the device. */
static vkg_status check_mmt(const vkg_device_t *dev, const vkg_matmul_tiling *m, int i)
{
    static const char *const what[VKG_MMT_SIZES] = {"the tiled matmul's small tile's ",
                                                    "the tiled matmul's medium tile's ",
                                                    "the tiled matmul's large tile's "};
    const field_range fields[] = {
        {"bm", m->bm, 1, 256, 0},   {"bn", m->bn, 1, 256, 0}, {"bk", m->bk, 1, 64, 0},
        {"tm", m->tm, 1, 16, 0},    {"tn", m->tn, 1, 16, 0},  {"subgroup", m->subgroup, 0, 128, 1},
        {"dbuf", m->dbuf, 0, 1, 0},
    };
    VKG_TRY(check_fields(dev, what[i], fields, sizeof fields / sizeof fields[0]));
    VKG_CHECK(m->bm % m->tm == 0 && m->bn % m->tn == 0, VKG_ERR_INVALID_ARG,
              "device tuning: the tiled matmul's block %ux%u is not a whole number of %ux%u "
              "tiles",
              m->bm, m->bn, m->tm, m->tn);
    uint32_t inv = dev->info.max_workgroup_invocations, threads = mmt_threads(m);
    VKG_CHECK(threads <= inv, VKG_ERR_INVALID_ARG,
              "device tuning: the tiled matmul's block %ux%u of %ux%u tiles needs %u invocations, "
              "more than %s's %u",
              m->bm, m->bn, m->tm, m->tn, threads, dev->info.name, inv);
    size_t smem = vkg_matmul_tiling_smem(m);
    VKG_CHECK(smem <= dev->info.max_shared_memory, VKG_ERR_INVALID_ARG,
              "device tuning: the tiled matmul's %ux%ux%u tiles%s need %zu bytes of shared "
              "memory, more than %s's %u%s",
              m->bm, m->bn, m->bk, m->dbuf ? ", double buffered," : "", smem, dev->info.name,
              dev->info.max_shared_memory,
              m->dbuf ? " (single buffered, +sb, they need half as much)" : "");
    return VKG_OK;
}

vkg_status vkg_device_tuning_set(vkg_device_t *dev, const vkg_device_tuning *t)
{
    uint32_t inv = dev->info.max_workgroup_invocations;
    const field_range fields[] = {
        {"matmul_tm", t->matmul_tm, 1, 16, 0},
        {"matmul_tn", t->matmul_tn, 1, 16, 0},
        {"matmul_lx", t->matmul_lx, 1, inv, 0},
        {"matmul_tiled", t->matmul_tiled, 0, 1, 0},
        {"mmt_fill", t->mmt_fill, 1, UINT32_MAX, 0},
        {"mmt_splitk", t->mmt_splitk, 0, 1, 0},
        {"mmt_vec4", t->mmt_vec4, 0, 1, 0},
        {"attention", (uint32_t)t->attention, VKG_ATTENTION_SHARED, VKG_ATTENTION_DIRECT, 0},
        {"layernorm_wg", t->layernorm_wg, 1, inv, 1},
        {"xent_wg_max", t->xent_wg_max, 1, inv, 1},
        {"encoder_wte_wg", t->encoder_wte_wg, 1, inv, 0},
        {"sumsq_wg", t->sumsq_wg, 1, inv, 1},
        {"grad_reduce_chunks", t->grad_reduce_chunks, 0, inv / VKG_GRAD_REDUCE_CX, 0},
        {"coopmat", t->coopmat, 0, 2, 0},
        {"coopmat_all", t->coopmat_all, 0, 1, 0},
        {"coopmat_grads", t->coopmat_grads, 0, 1, 0},
        {"coopmat_m", t->coopmat_m, 8, 16, 1},
        {"coopmat_n", t->coopmat_n, 8, 16, 1},
        {"coopmat_k", t->coopmat_k, 8, 32, 1},
    };
    VKG_TRY(check_fields(dev, "", fields, sizeof fields / sizeof fields[0]));
    VKG_CHECK(t->coopmat != 1 || dev->opts.coopmat == VKG_COOPMAT_ON, VKG_ERR_INVALID_ARG,
              "device tuning: coopmat = 1 (cooperative matrices) on %s, which was not opened "
              "with them (vkg_device_opts.coopmat)",
              dev->info.name);
    for (int i = 0; i < VKG_MMT_SIZES; i++)
        VKG_TRY(check_mmt(dev, &t->mmt[i], i));
    vkg_device_tuning *now = tuning_of(dev);
    VKG_CHECK(now, VKG_ERR_NOMEM, "device tuning: no memory for %s's tuning", dev->info.name);
    *now = *t;
    return VKG_OK;
}

vkg_status vkg_device_force_tiles(vkg_device_t *dev, const vkg_matmul_tiling *tiles)
{
    vkg_device_tuning forced = vkg_device_tuning_get(dev);
    vkg__mmt_force(&forced, tiles);
    return vkg_device_tuning_set(dev, &forced);
}

void vkg_device_matmul_choice(const vkg_device_t *dev, vkg_matmul_choice *out)
{
    vkg_device_tuning tu = vkg_device_tuning_get(dev);
    *out = (vkg_matmul_choice){.tiled = tu.matmul_tiled != 0,
                               .row = tu.mmt_row,
                               .fill = tu.mmt_fill,
                               .coopmat = (int)tu.coopmat,
                               .coopmat_m = tu.coopmat_m,
                               .coopmat_n = tu.coopmat_n,
                               .coopmat_k = tu.coopmat_k,
                               .coopmat_rewritten = tu.coopmat == 1 && dev->coopmat_rewrite};
    for (int i = 0; i < VKG_MMT_SIZES; i++) {
        out->tiles[i] = tu.mmt[i];
        out->subgroup[i] = vkg__mmt_subgroup(dev, &tu.mmt[i]);
        out->dbuf_dropped[i] = (tu.mmt_dbuf_dropped >> i) & 1;
    }
}
