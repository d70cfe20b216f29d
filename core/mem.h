/* mem.h: memory accounting: this process's peak and current RSS, and a counter of bytes an engine
 * holds (its buffers, shards and optimizer state), tracked through mem_track. */
#ifndef SB_MEM_H
#define SB_MEM_H
#include <stddef.h>

size_t mem_peak_rss(void);      /* VmHWM, bytes */
size_t mem_current_rss(void);   /* VmRSS, bytes */
size_t mem_available(void);     /* the host's MemAvailable (/proc/meminfo), bytes; 0 when unknown */
/* A tracked counter: add or subtract bytes; keeps the peak. */
typedef struct { size_t cur, peak; } mem_counter_t;
static inline void mem_track(mem_counter_t *c, long long delta)
{
    c->cur = (size_t)((long long)c->cur + delta);
    if (c->cur > c->peak) c->peak = c->cur;
}
/* Reset the kernel's peak-RSS mark (writes 5 to /proc/self/clear_refs); 0 or ERR_SYS. */
int mem_reset_peak(void);

#endif
