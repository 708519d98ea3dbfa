/* The index of a sharded safetensors model, model.safetensors.index.json: which shard file holds
 * each tensor. Reads the whole file (capped like a safetensors header), keeps only "weight_map"
 * and refuses shard names that could reach outside the index's folder. Does not open the shards
 * nor check that they hold what the index says: the caller opens them with vkg_safetensors_open. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/escape.h"
#include "base/json.h"
#include "io/io_internal.h"
#include "os/file.h"

static int by_name(const void *a, const void *b)
{
    return strcmp(((const vkg_st_index_entry *)a)->name, ((const vkg_st_index_entry *)b)->name);
}

void vkg_safetensors_index_deinit(vkg_st_index *idx)
{
    if (!idx)
        return;
    for (int i = 0; i < idx->count; i++) {
        free(idx->entries[i].name);
        free(idx->entries[i].file);
    }
    free(idx->entries);
    idx->entries = NULL;
    idx->count = 0;
}

static char *dup_n(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p)
        memcpy(p, s, n + 1);
    return p;
}

/* Check a shard file name: a plain, non-empty file name with no way out of the folder. */
static vkg_status check_file(const char *path, const char *tensor, const char *file, size_t len)
{
    char t[80], f[80];
    vkg__escape(t, sizeof t, tensor, strlen(tensor));
    vkg__escape(f, sizeof f, file, len);
    VKG_CHECK(len > 0 && strlen(file) == len && !strpbrk(file, "/\\:") && !strstr(file, ".."),
              VKG_ERR_FORMAT,
              "%s: tensor '%s': shard file \"%s\" is not a plain file name (empty, or holds '/', "
              "'\\', ':', '..' or a NUL)",
              path, t, f);
    return VKG_OK;
}

/* Parse the "weight_map" object into idx (appending). */
static vkg_status parse_map(vkg__json *j, const char *path, vkg_st_index *idx, int *cap, char **buf,
                            size_t *bcap)
{
    int more = 0;
    size_t len = 0;
    char shown[80];
    VKG_TRY(vkg__json_open(j, '{', &more));
    while (more) {
        if (idx->count == *cap) {
            int nc = *cap ? 2 * *cap : 64;
            vkg_st_index_entry *ne = realloc(idx->entries, (size_t)nc * sizeof *ne);
            VKG_CHECK(ne, VKG_ERR_NOMEM, "%s: out of memory", path);
            idx->entries = ne;
            *cap = nc;
        }
        vkg_st_index_entry *e = &idx->entries[idx->count];
        VKG_TRY(vkg__json_string(j, buf, &len, bcap));
        VKG_CHECK(strlen(*buf) == len, VKG_ERR_FORMAT, "%s: tensor name '%s' holds a NUL", path,
                  vkg__escape(shown, sizeof shown, *buf, len));
        e->name = dup_n(*buf, len);
        VKG_CHECK(e->name, VKG_ERR_NOMEM, "%s: out of memory", path);
        e->file = NULL;
        idx->count++; /* owned by idx from here: freed on error too */
        VKG_TRY(vkg__json_expect(j, ':'));
        VKG_CHECK(vkg__json_peek(j) == '"', VKG_ERR_FORMAT,
                  "%s: weight_map: the value of tensor '%s' is not a file name string", path,
                  vkg__escape(shown, sizeof shown, e->name, strlen(e->name)));
        VKG_TRY(vkg__json_string(j, buf, &len, bcap));
        VKG_TRY(check_file(path, e->name, *buf, len));
        e->file = dup_n(*buf, len);
        VKG_CHECK(e->file, VKG_ERR_NOMEM, "%s: out of memory", path);
        VKG_TRY(vkg__json_next(j, '}', &more));
    }
    return VKG_OK;
}

static vkg_status parse(vkg__json *j, const char *path, vkg_st_index *idx, char **buf, size_t *bcap)
{
    int more = 0, cap = 0, seen = 0;
    size_t len = 0;
    char shown[80];
    VKG_TRY(vkg__json_open(j, '{', &more));
    while (more) {
        VKG_TRY(vkg__json_string(j, buf, &len, bcap));
        VKG_TRY(vkg__json_expect(j, ':'));
        if (!strcmp(*buf, "weight_map")) {
            VKG_CHECK(!seen, VKG_ERR_FORMAT, "%s: \"weight_map\" appears twice", path);
            seen = 1;
            VKG_TRY(parse_map(j, path, idx, &cap, buf, bcap));
        } else {
            VKG_TRY(vkg__json_skip(j));
        }
        VKG_TRY(vkg__json_next(j, '}', &more));
    }
    VKG_TRY(vkg__json_end(j));
    VKG_CHECK(seen, VKG_ERR_FORMAT, "%s: no \"weight_map\" object (not a safetensors index?)",
              path);
    if (idx->count)
        qsort(idx->entries, (size_t)idx->count, sizeof *idx->entries, by_name);
    for (int i = 1; i < idx->count; i++)
        VKG_CHECK(
            strcmp(idx->entries[i - 1].name, idx->entries[i].name), VKG_ERR_FORMAT,
            "%s: weight_map names tensor '%s' twice", path,
            vkg__escape(shown, sizeof shown, idx->entries[i].name, strlen(idx->entries[i].name)));
    return VKG_OK;
}

vkg_status vkg__safetensors_index_parse(const char *text, size_t n, const char *path,
                                        vkg_st_index *idx)
{
    vkg__json j;
    char *buf = NULL;
    size_t bcap = 0;
    idx->count = 0;
    idx->entries = NULL;
    VKG_CHECK(vkg__utf8_valid(text, n), VKG_ERR_FORMAT, "%s: not valid UTF-8", path);
    vkg__json_init(&j, text, n, path);
    vkg_status st = parse(&j, path, idx, &buf, &bcap);
    free(buf);
    if (st < 0)
        vkg_safetensors_index_deinit(idx);
    return st;
}

vkg_status vkg_safetensors_index_read(const char *path, vkg_st_index *idx)
{
    int fd = -1;
    uint64_t size = 0;
    idx->count = 0;
    idx->entries = NULL;
    VKG_TRY(vkg__io_open_fd(path, &fd, &size));
    vkg_status st = VKG_OK;
    char *text = NULL;
    VKG_CHECK_GOTO(st, size <= VKG_ST_MAX_HEADER, VKG_ERR_FORMAT, done,
                   "%s: %llu bytes, over the %d-byte limit of an index", path,
                   (unsigned long long)size, VKG_ST_MAX_HEADER);
    text = malloc((size_t)size + 1);
    VKG_CHECK_GOTO(st, text, VKG_ERR_NOMEM, done, "%s: out of memory", path);
    for (size_t got = 0; got < size;) {
        long long r = vkg_os_read(fd, text + got, (size_t)size - got);
        VKG_CHECK_GOTO(st, r > 0, r < 0 ? VKG_ERR_IO : VKG_ERR_FORMAT, done, "%s: %s at byte %zu",
                       path, r < 0 ? "read error" : "file ends early", got);
        got += (size_t)r;
    }
    st = vkg__safetensors_index_parse(text, (size_t)size, path, idx);
done:
    free(text);
    vkg_os_close(fd);
    return st;
}

const char *vkg_safetensors_index_lookup(const vkg_st_index *idx, const char *name)
{
    vkg_st_index_entry key = {(char *)name, NULL};
    const vkg_st_index_entry *hit =
        idx->count ? bsearch(&key, idx->entries, (size_t)idx->count, sizeof key, by_name) : NULL;
    return hit ? hit->file : NULL;
}
