/* netdelay.c: the lat= delay helper (netdelay.h): a forked process that reads packet ids from NFQUEUE 0 of
 * every emulated machine (raw nfnetlink, metadata only, GSO packets whole) and releases them in order once
 * their delay has passed (a timerfd at the earliest deadline, one batch verdict per queue). */
#include "harness/launch/netdelay.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S_RING (1u << 17) /* packets held per queue; beyond it the oldest goes early rather than being lost */

typedef struct {
    int fd;
    uint32_t *id;
    int64_t *due;
    unsigned head, n;
} s_q_t;

static int64_t s_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Append a netlink attribute to the message at buf (its nlmsg_len grows). */
static void s_attr(char *buf, int type, const void *data, size_t len)
{
    struct nlmsghdr *h = (struct nlmsghdr *)buf;
    struct nlattr *a = (struct nlattr *)(buf + NLMSG_ALIGN(h->nlmsg_len));
    a->nla_type = (uint16_t)type;
    a->nla_len = (uint16_t)(NLA_HDRLEN + len);
    memcpy((char *)a + NLA_HDRLEN, data, len);
    h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + NLA_ALIGN(a->nla_len);
}

static void s_msg(char *buf, int type, int flags)
{
    struct nlmsghdr *h = (struct nlmsghdr *)buf;
    memset(buf, 0, NLMSG_HDRLEN + sizeof(struct nfgenmsg));
    h->nlmsg_len = NLMSG_LENGTH(sizeof(struct nfgenmsg));
    h->nlmsg_type = (uint16_t)((NFNL_SUBSYS_QUEUE << 8) | type);
    h->nlmsg_flags = (uint16_t)(NLM_F_REQUEST | flags);
    struct nfgenmsg *g = NLMSG_DATA(h);
    g->nfgen_family = AF_UNSPEC;
    g->version = NFNETLINK_V0;
    g->res_id = htons(0);
}

/* Send a config message and wait for its ack: 0 or -errno. */
static int s_config(int fd, char *buf)
{
    if (send(fd, buf, ((struct nlmsghdr *)buf)->nlmsg_len, 0) < 0) return -errno;
    char r[8192];
    ssize_t n = recv(fd, r, sizeof r, 0);
    if (n < 0) return -errno;
    struct nlmsghdr *h = (struct nlmsghdr *)r;
    if (!NLMSG_OK(h, (size_t)n) || h->nlmsg_type != NLMSG_ERROR) return -EPROTO;
    return ((struct nlmsgerr *)NLMSG_DATA(h))->error;
}

/* Bind queue 0 in the calling thread's namespace: metadata only, GSO packets unsegmented. */
static int s_bind(int *fdp, char *why, size_t len)
{
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
    if (fd < 0) { snprintf(why, len, "netlink socket: %s", strerror(errno)); return -1; }
    int big = 16 << 20;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) < 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) { snprintf(why, len, "netlink bind: %s", strerror(errno)); close(fd); return -1; }
    char buf[256];
    struct nfqnl_msg_config_cmd cmd = {.command = NFQNL_CFG_CMD_BIND, .pf = htons(AF_INET)};
    struct nfqnl_msg_config_params par = {.copy_range = htonl(0), .copy_mode = NFQNL_COPY_META};
    uint32_t maxlen = htonl(S_RING), flags = htonl(NFQA_CFG_F_GSO);
    int rc;
    s_msg(buf, NFQNL_MSG_CONFIG, NLM_F_ACK);
    s_attr(buf, NFQA_CFG_CMD, &cmd, sizeof cmd);
    if ((rc = s_config(fd, buf)) < 0) { snprintf(why, len, "NFQUEUE 0 bind: %s", strerror(-rc)); close(fd); return -1; }
    s_msg(buf, NFQNL_MSG_CONFIG, NLM_F_ACK);
    s_attr(buf, NFQA_CFG_PARAMS, &par, sizeof par);
    s_attr(buf, NFQA_CFG_QUEUE_MAXLEN, &maxlen, sizeof maxlen);
    s_attr(buf, NFQA_CFG_MASK, &flags, sizeof flags);
    s_attr(buf, NFQA_CFG_FLAGS, &flags, sizeof flags);
    if ((rc = s_config(fd, buf)) < 0) { snprintf(why, len, "NFQUEUE 0 parameters: %s", strerror(-rc)); close(fd); return -1; }
    *fdp = fd;
    return 0;
}

/* Accept every packet of q up to and including id (one batch verdict). */
static void s_release(s_q_t *q, uint32_t id)
{
    char buf[128];
    s_msg(buf, NFQNL_MSG_VERDICT_BATCH, 0);
    struct nfqnl_msg_verdict_hdr v = {.verdict = htonl(NF_ACCEPT), .id = htonl(id)};
    s_attr(buf, NFQA_VERDICT_HDR, &v, sizeof v);
    while (send(q->fd, buf, ((struct nlmsghdr *)buf)->nlmsg_len, 0) < 0 && errno == EINTR) {}
}

static void s_push(s_q_t *q, uint32_t id, int64_t due)
{
    if (q->n == S_RING) { /* full: the oldest leaves now */
        s_release(q, q->id[q->head]);
        q->head = (q->head + 1) % S_RING, q->n--;
    }
    unsigned t = (q->head + q->n) % S_RING;
    q->id[t] = id, q->due[t] = due, q->n++;
}

static void s_read(s_q_t *q, int64_t delay_ns)
{
    char buf[65536];
    for (;;) {
        ssize_t n = recv(q->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return; /* EAGAIN; ENOBUFS lost ids, which the next batch verdict releases */
        int64_t due = s_now_ns() + delay_ns;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
            if ((h->nlmsg_type & 0xff) != NFQNL_MSG_PACKET || (h->nlmsg_type >> 8) != NFNL_SUBSYS_QUEUE) continue;
            char *p = (char *)NLMSG_DATA(h) + NLMSG_ALIGN(sizeof(struct nfgenmsg));
            int left = (int)h->nlmsg_len - (int)(p - (char *)h);
            for (struct nlattr *a = (struct nlattr *)p; left >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN && a->nla_len <= left;
                 left -= NLA_ALIGN(a->nla_len), a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len)))
                if ((a->nla_type & NLA_TYPE_MASK) == NFQA_PACKET_HDR) {
                    struct nfqnl_msg_packet_hdr ph;
                    memcpy(&ph, (char *)a + NLA_HDRLEN, sizeof ph);
                    s_push(q, ntohl(ph.packet_id), due);
                    break;
                }
        }
    }
}

static volatile sig_atomic_t s_stop;
static void s_on_term(int sig) { (void)sig; s_stop = 1; }

/* The helper's loop; never returns. */
static void s_child(int nns, const int *nsfd, double delay_us, int ready)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    prctl(PR_SET_TIMERSLACK, 1UL);
    signal(SIGINT, SIG_IGN); /* the driver handles ^C and ends this helper */
    struct sigaction sa = {.sa_handler = s_on_term};
    sigaction(SIGTERM, &sa, NULL);
    /* a real-time priority keeps its wake-ups close to the deadlines on a busy host, as netem's run in softirq;
     * without the privilege it runs at the normal priority */
    struct sched_param sp = {.sched_priority = 10};
    (void)sched_setscheduler(0, SCHED_FIFO, &sp);
    s_q_t *q = calloc((size_t)nns, sizeof *q);
    int ep = epoll_create1(EPOLL_CLOEXEC), tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    char why[200] = "out of memory";
    int ok = q && ep >= 0 && tfd >= 0;
    for (int i = 0; ok && i < nns; i++) {
        q[i].id = malloc(S_RING * sizeof *q[i].id), q[i].due = malloc(S_RING * sizeof *q[i].due);
        ok = q[i].id && q[i].due && setns(nsfd[i], CLONE_NEWNET) == 0;
        if (!ok && q[i].id && q[i].due) snprintf(why, sizeof why, "setns: %s", strerror(errno));
        ok = ok && s_bind(&q[i].fd, why, sizeof why) == 0;
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        ok = ok && epoll_ctl(ep, EPOLL_CTL_ADD, q[i].fd, &ev) == 0;
    }
    struct epoll_event tev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
    ok = ok && epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &tev) == 0;
    if (!ok) {
        (void)!write(ready, why, strlen(why));
        _exit(1);
    }
    (void)!write(ready, "", 1);
    close(ready);
    int64_t delay_ns = (int64_t)(delay_us * 1e3);
    while (!s_stop) {
        int64_t now = s_now_ns(), next = INT64_MAX;
        for (int i = 0; i < nns; i++) {
            s_q_t *x = &q[i];
            uint32_t last = 0;
            int any = 0;
            while (x->n && x->due[x->head] <= now) {
                last = x->id[x->head], any = 1;
                x->head = (x->head + 1) % S_RING, x->n--;
            }
            if (any) s_release(x, last);
            if (x->n && x->due[x->head] < next) next = x->due[x->head];
        }
        struct itimerspec its = {{0, 0}, {0, 0}};
        if (next != INT64_MAX) its.it_value = (struct timespec){.tv_sec = next / 1000000000, .tv_nsec = next % 1000000000};
        timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
        struct epoll_event ev[64];
        int k = epoll_wait(ep, ev, 64, -1);
        for (int j = 0; j < k; j++) {
            if (ev[j].data.u32 == UINT32_MAX) {
                uint64_t x;
                (void)!read(tfd, &x, sizeof x);
            } else {
                s_read(&q[ev[j].data.u32], delay_ns);
            }
        }
    }
    _exit(0);
}

int h_netdelay_start(pid_t *pid, int nns, const int *nsfd, double delay_us, char *err, size_t errlen)
{
    *pid = -1;
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) { snprintf(err, errlen, "lat=: pipe: %s", strerror(errno)); return -1; }
    fflush(NULL);
    pid_t c = fork();
    if (c < 0) {
        snprintf(err, errlen, "lat=: fork: %s", strerror(errno));
        close(p[0]), close(p[1]);
        return -1;
    }
    if (c == 0) {
        close(p[0]);
        s_child(nns, nsfd, delay_us, p[1]);
    }
    close(p[1]);
    char msg[256];
    ssize_t n;
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    int pr = poll(&pf, 1, 10000);
    n = pr > 0 ? read(p[0], msg, sizeof msg - 1) : -1;
    close(p[0]);
    if (n == 1 && msg[0] == '\0') {
        *pid = c;
        return 0;
    }
    msg[n > 0 ? n : 0] = '\0';
    snprintf(err, errlen, "lat=: the delay helper could not bind its NFQUEUE: %s", n > 0 ? msg : pr == 0 ? "no answer in 10 s" : "it died");
    h_netdelay_stop(c);
    return -1;
}

void h_netdelay_stop(pid_t pid)
{
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
}
