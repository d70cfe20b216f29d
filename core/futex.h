/* futex.h: the two primitives of shared-memory waits (core/tp_shm.c, core/board.c): a futex call on a
 * 32-bit word of a shared mapping (FUTEX_WAIT / FUTEX_WAKE, not private: the word is shared between
 * processes) and the CPU's spin-wait hint. */
#ifndef SB_FUTEX_H
#define SB_FUTEX_H
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static inline long futex_op(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, 0);
}

static inline void futex_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

#endif
