/* A small JSON tree over base/json.c's pull reader, for files whose keys come in any order and
 * whose parts refer to each other (Hugging Face's tokenizer.json). Nodes live in one array and
 * strings in one arena, so a tree is two allocations however big the file. Nesting is limited
 * to 64 levels. Internal to src/data. */
#ifndef VKG_DATA_JSONTREE_H
#define VKG_DATA_JSONTREE_H

#include <stddef.h>

#include "vkgpt/status.h"

typedef enum vkg__jt_type {
    VKG_JT_NULL,
    VKG_JT_BOOL,
    VKG_JT_NUM,
    VKG_JT_STR,
    VKG_JT_ARR,
    VKG_JT_OBJ,
} vkg__jt_type;

typedef struct vkg__jt_node {
    vkg__jt_type type;
    int b;            /* VKG_JT_BOOL */
    double num;       /* VKG_JT_NUM */
    size_t str, len;  /* VKG_JT_STR: offset of the NUL-terminated value in the arena, its length */
    size_t key, klen; /* as a member of an object: its key in the arena */
    size_t off;       /* byte offset of the value in the file, for messages */
    long first, next; /* first child, next sibling; -1 for none */
    long count;       /* number of children */
} vkg__jt_node;

typedef struct vkg__jt {
    vkg__jt_node *n;
    size_t nn, ncap;
    char *arena;
    size_t alen, acap;
    const char *name; /* file name for messages (kept, not copied) */
} vkg__jt;

/* Parse n bytes of JSON into t (zero it first; free it with vkg__jt_free). Node 0 is the root.
 * VKG_ERR_FORMAT naming name and the byte offset on malformed text, VKG_ERR_NOMEM. */
vkg_status vkg__jt_parse(vkg__jt *t, const char *text, size_t n, const char *name);

void vkg__jt_free(vkg__jt *t);

/* The member `key` of object node obj, or -1 (also when obj is not an object or is -1). */
long vkg__jt_get(const vkg__jt *t, long obj, const char *key);

/* The string of node i, or NULL when i is -1 or not a string. */
const char *vkg__jt_str(const vkg__jt *t, long i, size_t *len);

/* The key of member node i. */
const char *vkg__jt_key(const vkg__jt *t, long i, size_t *len);

/* 1 when node i exists and is not null. */
int vkg__jt_present(const vkg__jt *t, long i);

#endif
