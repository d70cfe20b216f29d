/* cma.c: single-copy reads from another process (process_vm_readv); see cma.h. */
#include "core/cma.h"
#include "core/err.h"
#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* The probe cookie: a value a peer can only read back if it may read our memory. */
static volatile uint64_t s_cookie = 0x5eedc0de00000000ull;

cma_desc_t cma_desc(const void *addr, size_t len)
{
    cma_desc_t d = {CMA_DESC_MAGIC, (uint64_t)getpid(), (uint64_t)(uintptr_t)addr, (uint64_t)len};
    return d;
}

uint64_t cma_cookie_addr(void) { return (uint64_t)(uintptr_t)&s_cookie; }
uint64_t cma_cookie_value(void)
{
    if ((s_cookie & 0xffffffffull) == 0) s_cookie |= (uint64_t)getpid() & 0xffffffffull;
    return s_cookie;
}

int cma_read(pid_t pid, void *dst, uint64_t addr, size_t len)
{
    size_t done = 0;
    while (done < len) {
        struct iovec l = {(char *)dst + done, len - done}, r = {(void *)(uintptr_t)(addr + done), len - done};
        ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (n < 0) {
            int e = errno;
            if (e == EINTR) continue;
            if (e == EPERM || e == ENOSYS)
                return err_set(ERR_UNSUP, "cannot read process %d's memory (process_vm_readv: %s)", (int)pid, strerror(e));
            if (e == ESRCH) return err_set(ERR_PEER, "process %d is gone", (int)pid);
            return err_set(ERR_RANGE, "reading %zu bytes at 0x%llx of process %d failed: %s", len - done,
                           (unsigned long long)(addr + done), (int)pid, strerror(e));
        }
        if (n == 0) return err_set(ERR_RANGE, "process %d: short read at 0x%llx", (int)pid, (unsigned long long)(addr + done));
        done += (size_t)n;
    }
    return 0;
}

int cma_probe(pid_t pid, uint64_t addr, uint64_t expect, const char **why)
{
    uint64_t v = 0;
    struct iovec l = {&v, sizeof v}, r = {(void *)(uintptr_t)addr, sizeof v};
    ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n != (ssize_t)sizeof v) {
        *why = n < 0 && (errno == EPERM || errno == ENOSYS) ? "not permitted (ptrace rights)" : "read failed";
        return 0;
    }
    if (v != expect) {
        *why = "the cookie differs";
        return 0;
    }
    *why = "ok";
    return 1;
}
