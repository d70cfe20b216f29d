/* flood.c: the bytes of a peer that announces a 1 GiB frame and streams junk after it (flood.h). */
#include "tests/lib/flood.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

size_t flood_zmtp_preamble(unsigned char *pre)
{
    memset(pre, 0, 64);
    pre[0] = 0xff; pre[9] = 0x7f; pre[10] = 3; pre[11] = 0;
    memcpy(pre + 12, "NULL", 4);
    size_t n = 64;
    static const unsigned char ready[] = {0x04, 28, 5, 'R', 'E', 'A', 'D', 'Y', 11, 'S', 'o', 'c', 'k', 'e', 't', '-',
                                          'T', 'y', 'p', 'e', 0, 0, 0, 6, 'D', 'E', 'A', 'L', 'E', 'R'};
    memcpy(pre + n, ready, sizeof ready);
    n += sizeof ready;
    pre[n++] = 0x02; /* a long frame, no more */
    for (int i = 7; i >= 0; i--) pre[n++] = (unsigned char)((1ull << 30) >> (8 * i));
    return n;
}

size_t flood_junk(int fd, int max_mib)
{
    size_t chunk = 1 << 20, sent = 0;
    char *junk = calloc(1, chunk);
    for (int i = 0; junk && i < max_mib; i++) {
        ssize_t w = send(fd, junk, chunk, MSG_NOSIGNAL);
        if (w <= 0) break;
        sent += (size_t)w;
    }
    free(junk);
    return sent;
}

size_t flood_zmtp_greeting(unsigned char *pre, const char *mech)
{
    memset(pre, 0, 64);
    pre[0] = 0xff; pre[9] = 0x7f; pre[10] = 3; pre[11] = 0;
    memcpy(pre + 12, mech, strlen(mech) < 20 ? strlen(mech) : 20);
    size_t n = 64;
    if (!strcmp(mech, "NULL")) {
        static const unsigned char ready[] = {0x04, 28, 5, 'R', 'E', 'A', 'D', 'Y', 11, 'S', 'o', 'c', 'k', 'e', 't', '-',
                                              'T', 'y', 'p', 'e', 0, 0, 0, 6, 'D', 'E', 'A', 'L', 'E', 'R'};
        memcpy(pre + n, ready, sizeof ready);
        n += sizeof ready;
    }
    return n;
}

size_t flood_more_frames(int fd, int max_mib)
{
    size_t chunk = 1 << 20, sent = 0;
    unsigned char *buf = calloc(1, chunk + 9);
    if (!buf) return 0;
    buf[0] = 0x03; /* a long frame, more to come */
    for (int i = 7; i >= 0; i--) buf[8 - i] = (unsigned char)((uint64_t)chunk >> (8 * i));
    for (int i = 0; i < max_mib; i++) {
        size_t off = 0;
        while (off < chunk + 9) {
            ssize_t w = send(fd, buf + off, chunk + 9 - off, MSG_NOSIGNAL);
            if (w <= 0) { free(buf); return sent; }
            off += (size_t)w;
            sent += (size_t)w;
        }
    }
    free(buf);
    return sent;
}
