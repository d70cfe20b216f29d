/* timer.h: monotonic clock helpers (ns / us / ms) and deadlines for timeouts. */
#ifndef SB_TIMER_H
#define SB_TIMER_H
#include <stdint.h>
#include <time.h>

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static inline double now_us(void) { return (double)now_ns() / 1e3; }
static inline double now_ms(void) { return (double)now_ns() / 1e6; }

/* A deadline `timeout_ms` from now; timeout_ms < 0 means never. */
static inline uint64_t deadline_in(int timeout_ms)
{
    return timeout_ms < 0 ? UINT64_MAX : now_ns() + (uint64_t)timeout_ms * 1000000ull;
}
/* Milliseconds left before a deadline (0 once passed, -1 for never), clamped to int. */
static inline int deadline_left_ms(uint64_t deadline)
{
    if (deadline == UINT64_MAX) return -1;
    uint64_t t = now_ns();
    if (t >= deadline) return 0;
    uint64_t ms = (deadline - t + 999999ull) / 1000000ull;
    return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}
static inline int deadline_passed(uint64_t deadline) { return deadline != UINT64_MAX && now_ns() >= deadline; }

#endif
