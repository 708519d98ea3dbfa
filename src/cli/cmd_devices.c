/* `vkgpt devices`: list every Vulkan device with vendor, type, memory and the features vkgpt
 * needs, and for each usable one the memory type vkgpt chooses per use and the matmul kernel and
 * tiles it runs (which means opening it); `--device SPEC` (or VKGPT_DEVICE) checks that a device
 * can be opened; `--tiles` lists the tiled matmul's per-vendor table (the --tiles entries). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "vkgpt/device.h"
#include "vkgpt/model.h"
#include "vkgpt/tuning.h"

const char *const vkg_cli_coopmats[] = {"off", "on", "emulate", "auto", NULL};

int vkg_cli_coopmat_check(const char *cmd, int coopmat, int precision)
{
    if (coopmat == VKG_COOPMAT_OFF || coopmat == VKG_COOPMAT_AUTO ||
        precision == VKG_PRECISION_BF16)
        return 0;
    fprintf(stderr,
            "vkgpt %s: --coopmat %s runs the products of the bf16 weights copy, which only "
            "--precision bf16 has (fp32 products stay on the fp32 kernels)\n",
            cmd, vkg_cli_coopmats[coopmat]);
    return 2;
}

/* The cooperative-matrix configurations the device lists (vkgpt --coopmat on takes one with f16
 * inputs and f32 accumulation). */
static void print_coopmat(const vkg_device_info *d)
{
    if (!d->coopmat_khr && !d->coopmat_nv) {
        printf("    cooperative matrices: none (neither VK_KHR_cooperative_matrix nor "
               "VK_NV_cooperative_matrix; --coopmat on is refused)\n");
        return;
    }
    printf("    cooperative matrices:%s%s, %d configuration(s) (MxNxK A*B+C->result, scope):\n",
           d->coopmat_khr ? " VK_KHR_cooperative_matrix" : "",
           d->coopmat_nv ? " VK_NV_cooperative_matrix" : "", d->coopmat_count);
    for (int i = 0; i < d->coopmat_count; i++) {
        const vkg_coopmat_config *c = &d->coopmat[i];
        printf("      %ux%ux%u %s*%s+%s->%s %s%s (%s)\n", c->m, c->n, c->k, c->a, c->b, c->c,
               c->result, c->scope, c->saturating ? " saturating" : "", c->khr ? "KHR" : "NV");
    }
}

static void print_device(const vkg_device_info *d)
{
    printf("[%d] %s\n", d->index, d->name);
    printf("    vendor %s (0x%04x), type %s, Vulkan %u.%u.%u, driver %s\n", d->vendor, d->vendor_id,
           d->type, d->api_version >> 22, (d->api_version >> 12) & 0x3ff, d->api_version & 0xfff,
           d->driver);
    printf("    memory %.1f GiB device-local%s; subgroup %u; shared memory %u KiB; "
           "workgroup <= %u; push constants %u B\n",
           (double)d->device_local_bytes / (1024.0 * 1024.0 * 1024.0),
           d->unified_memory ? " (unified with host)" : "", d->subgroup_size,
           d->max_shared_memory / 1024, d->max_workgroup_invocations, d->max_push_constants);
    char maxbuf[48] = "not reported";
    if (d->driver_max_buffer)
        snprintf(maxbuf, sizeof maxbuf, "%.1f MiB", (double)d->driver_max_buffer / 1048576.0);
    printf("    largest allocation %.1f MiB (maxMemoryAllocationSize %.1f MiB, maxBufferSize %s); "
           "memory pools are split into allocations no larger\n",
           (double)d->max_allocation_bytes / 1048576.0,
           (double)d->driver_max_allocation / 1048576.0, maxbuf);
    printf("    required: bufferDeviceAddress %s, timelineSemaphore %s; optional: timestamps %s, "
           "float64 %s, int64 %s, float16 %s, 16-bit storage %s\n",
           d->buffer_device_address ? "yes" : "NO", d->timeline_semaphore ? "yes" : "NO",
           d->timestamps ? "yes" : "no", d->shader_float64 ? "yes" : "no",
           d->shader_int64 ? "yes" : "no", d->shader_float16 ? "yes" : "no",
           d->storage_16bit ? "yes" : "no");
    if (d->external_memory_host)
        printf("    VK_EXT_external_memory_host: yes (host memory imported at %llu-byte alignment: "
               "gradient buckets zero-copy)\n",
               (unsigned long long)d->host_import_alignment);
    else
        printf("    VK_EXT_external_memory_host: no (gradient buckets by host copies)\n");
    print_coopmat(d);
    if (d->suitable)
        printf("    usable by vkgpt\n");
    else
        printf("    NOT usable by vkgpt: missing %s\n", d->missing);
}

static void print_choice(const char *use, const vkg_memory_choice *m)
{
    printf("    memory %-9s type %d (%s), heap %d of %.1f GiB\n", use, m->type, m->flags, m->heap,
           (double)m->heap_bytes / (1024.0 * 1024.0 * 1024.0));
}

static void print_tiles(const char *label, const vkg_matmul_tiling *t, uint32_t sg, int dropped)
{
    printf("%s %ux%ux%u:%ux%u", label, t->bm, t->bn, t->bk, t->tm, t->tn);
    if (t->subgroup)
        printf("/%u (%s)", t->subgroup, sg ? "required" : "not supported here, dropped");
    if (t->dbuf)
        printf("+db");
    if (dropped) {
        vkg_matmul_tiling two = *t;
        two.dbuf = 1;
        printf(" (single buffered: double buffering needs %zu bytes of shared memory)",
               vkg_matmul_tiling_smem(&two));
    }
}

void vkg_cli_print_matmul(const vkg_device_t *dev, const char *indent)
{
    vkg_matmul_choice mc;
    vkg_device_matmul_choice(dev, &mc);
    const vkg_device_info *d = vkg_device_get_info(dev);
    printf("%smatmul: %s kernel; tiled table row %s:", indent, mc.tiled ? "tiled" : "register",
           mc.row);
    static const char *const sizes[3] = {" small", ", medium", ", large"};
    for (int i = 0; i < 3; i++)
        print_tiles(sizes[i], &mc.tiles[i], mc.subgroup[i], mc.dbuf_dropped[i]);
    printf("; shared memory %u bytes", d->max_shared_memory);
    printf("; fill %u workgroups; subgroup size control %s", mc.fill,
           d->subgroup_size_control ? "" : "no");
    if (d->subgroup_size_control)
        printf("%u..%u", d->subgroup_size_min, d->subgroup_size_max);
    printf("\n");
    if (mc.coopmat)
        printf("%sbf16 forward products: cooperative-matrix kernel%s, fragments %ux%ux%u%s\n",
               indent, mc.coopmat == 2 ? " emulated" : "", mc.coopmat_m, mc.coopmat_n, mc.coopmat_k,
               mc.coopmat_rewritten ? " (SPIR-V rewritten to KHR)" : "");
}

static void print_table(void)
{
    printf("tiled matmul table (--tiles ENTRY[+db|+sb]: +db double-buffered shared tiles, +sb "
           "single; none measured on a GPU yet, see src/ops/mmt.c):\n");
    vkg_matmul_tiling t;
    for (int i = 0; i < vkg_matmul_tiling_count(); i++) {
        const char *name = vkg_matmul_tiling_entry(i, &t);
        printf("  %-18s %3ux%3ux%2u:%ux%u  %4u invocations  subgroup %3u  %s  %5zu bytes of "
               "shared memory\n",
               name, t.bm, t.bn, t.bk, t.tm, t.tn, (t.bm / t.tm) * (t.bn / t.tn), t.subgroup,
               t.dbuf ? "double buffered" : "single buffered", vkg_matmul_tiling_smem(&t));
    }
}

/* Open device index and print the memory type of each use, or why it could not be opened. */
static void print_memory_choices(int index)
{
    char select[16];
    snprintf(select, sizeof select, "%d", index);
    vkg_device_opts opts = vkg_device_opts_default();
    opts.select = select;
    vkg_device_t *dev = NULL;
    vkg_status st = vkg_device_create(&opts, &dev);
    if (st != VKG_OK) {
        printf("    memory types: not chosen, the device did not open (error on stderr)\n");
        fflush(stdout);
        vkg_cli_report("devices", st);
        return;
    }
    const vkg_device_info *d = vkg_device_get_info(dev);
    print_choice("pools", &d->mem_pool);
    print_choice("readback", &d->mem_readback);
    print_choice("uploads", &d->mem_upload);
    if (d->readback_uncached)
        printf("    WARNING: no host-cached memory type: reading gradients and checkpoints back "
               "to the CPU goes through uncached memory and will be slow\n");
    vkg_cli_print_matmul(dev, "    ");
    vkg_device_destroy(&dev);
}

int vkg_cli_devices(int argc, char **argv)
{
    const char *select = getenv("VKGPT_DEVICE");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) {
            select = argv[++i];
        } else if (!strcmp(argv[i], "--tiles")) {
            print_table();
            return 0;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf(
                "usage: vkgpt devices [--device INDEX|NAME] [--tiles]\n"
                "  Lists Vulkan devices, and for each usable one the memory type vkgpt uses for\n"
                "  its arenas (pools), for what the CPU reads back and for uploads, and its "
                "matmul\n"
                "  kernel and tiles. With --device (or VKGPT_DEVICE), opens that device and fails\n"
                "  with exit code 2 when it does not exist. --tiles lists the tiled matmul's\n"
                "  per-vendor table, whose entries --tiles of train and bench take (ENTRY+db or\n"
                "  ENTRY+sb forces double- or single-buffered shared tiles).\n");
            return 0;
        } else {
            fprintf(stderr,
                    "vkgpt devices: unknown option '%s' (valid: --device, --tiles, --help)\n",
                    argv[i]);
            return 2;
        }
    }
    vkg_device_info *infos = NULL;
    int n = 0;
    vkg_status st = vkg_device_list(&infos, &n);
    if (st != VKG_OK)
        return vkg_cli_report("devices", st);
    for (int i = 0; i < n; i++) {
        print_device(&infos[i]);
        if (infos[i].suitable)
            print_memory_choices(infos[i].index);
    }
    if (n == 0)
        printf("no Vulkan devices\n");
    free(infos);
    if (select && *select) {
        vkg_device_opts opts = vkg_device_opts_default();
        opts.select = select;
        vkg_device_t *dev = NULL;
        st = vkg_device_create(&opts, &dev);
        if (st != VKG_OK)
            return vkg_cli_report("devices", st);
        printf("selected [%d] %s\n", vkg_device_get_info(dev)->index,
               vkg_device_get_info(dev)->name);
        vkg_device_destroy(&dev);
    }
    return 0;
}
