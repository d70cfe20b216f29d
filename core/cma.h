/* cma.h: single-copy reads from another process of this host (Linux cross-memory attach,
 * process_vm_readv), as MPI libraries use for large intra-node messages: the bytes cross once, kernel to
 * kernel, instead of twice through a socket. Needs the right to ptrace the other process (same user, and
 * Yama's ptrace_scope 0 or a container that allows it): cma_probe says whether it holds. */
#ifndef SB_CMA_H
#define SB_CMA_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A region of a process that a peer may read: what travels in a message instead of the bytes. */
typedef struct {
    uint64_t magic;           /* CMA_DESC_MAGIC */
    uint64_t pid;
    uint64_t addr;
    uint64_t len;
} cma_desc_t;

#define CMA_DESC_MAGIC 0x31414d4342534eull /* "NSBCMA1" */

cma_desc_t cma_desc(const void *addr, size_t len);
/* Copy len bytes at remote address addr of process pid into dst. 0; ERR_UNSUP when the kernel refuses
 * (no ptrace right), ERR_PEER when the process is gone, ERR_RANGE for a bad address, all with detail. */
int cma_read(pid_t pid, void *dst, uint64_t addr, size_t len);
/* Read the 8-byte cookie at addr of pid and compare: 1 when this process can read pid's memory, 0 when
 * not (why in *why, a static string). */
int cma_probe(pid_t pid, uint64_t addr, uint64_t expect, const char **why);
/* The address and value of this process's probe cookie (for cma_probe by a peer). */
uint64_t cma_cookie_addr(void);
uint64_t cma_cookie_value(void);

#endif
