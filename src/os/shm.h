/* Shared memory between the processes of one host, in the platform layer (src/os; see clock.h):
 * the parts the transport's shared-memory collectives are made of. Linux's alone for now
 * (src/os/linux/shm.c: memfd with seals, futex, abstract Unix sockets passing descriptors,
 * process_vm_readv); a build for another system has none of it and the transport builds
 * transport/shm_none.c instead, falling back to ZeroMQ and saying so. Every function returns 0 or
 * an errno value unless it says otherwise. */
#ifndef VKG_OS_SHM_H
#define VKG_OS_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* A new anonymous segment of no size, closed on exec, that can be sealed (memfd_create). */
int vkg_os_shm_new(int *fd);
/* Size it to bytes (ftruncate). */
int vkg_os_shm_resize(int fd, size_t bytes);
/* Seal it against shrinking, growing and further seals, so that no process can make another's
 * accesses fault. */
int vkg_os_shm_seal(int fd);
/* 1 when the segment is sealed against shrinking, 0 otherwise. */
int vkg_os_shm_sealed(int fd);
/* Its size in *bytes (fstat). */
int vkg_os_shm_size(int fd, size_t *bytes);
/* The bytes of it resident in memory, 0 when unknown. */
unsigned long long vkg_os_shm_resident(int fd);
/* Map bytes of it, shared, readable and writable, into *p. */
int vkg_os_shm_map(int fd, size_t bytes, void **p);
void vkg_os_shm_unmap(void *p, size_t bytes);
/* Give the pages of [p, p + bytes) of a mapping back to the system (their contents are lost). */
void vkg_os_shm_discard(void *p, size_t bytes);
/* Close a descriptor of this header's functions. */
void vkg_os_shm_close(int fd);

/* Sleep while *w holds val, at most timeout_ns (may return early, spuriously or on a signal). */
void vkg_os_wait_on(atomic_uint *w, uint32_t val, long long timeout_ns);
/* Wake every thread and process asleep on w in vkg_os_wait_on. */
void vkg_os_wake_all(atomic_uint *w);

/* Copy bytes at addr of process pid's memory into dst (EFAULT when it reads nothing more). */
int vkg_os_process_read(long pid, void *dst, uint64_t addr, size_t bytes);

/* Local sockets that pass descriptors, named in an abstract namespace (no file: the name goes
 * with the last socket). Listen at name; connect to it; accept within ms (ETIMEDOUT). */
int vkg_os_local_listen(const char *name, int *fd);
int vkg_os_local_connect(const char *name, int *fd);
int vkg_os_local_accept(int lfd, int ms, int *fd);
/* The user and process at the other end of a connected socket (SO_PEERCRED). */
int vkg_os_local_peer(int fd, unsigned *uid, long *pid);
/* This process's effective user. */
unsigned vkg_os_euid(void);
/* Receive one message of at most len bytes within ms (ETIMEDOUT when none came), its length in
 * *got and, when fd_out is not NULL, the descriptor it carried in *fd_out (-1: none). */
int vkg_os_local_recv(int fd, void *buf, size_t len, int *fd_out, int ms, long *got);
/* Send one message of len bytes, with the descriptor pass_fd when it is not -1; its length sent
 * in *sent. */
int vkg_os_local_send(int fd, const void *buf, size_t len, int pass_fd, long *sent);

#endif
