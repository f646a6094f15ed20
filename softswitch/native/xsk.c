/* softswitch's AF_XDP port I/O (xsk.h says what it offers).
 *
 * A port's socket: a UMEM of RX_FRAMES + TX_FRAMES frames, four rings (fill and RX for the frames
 * the kernel writes, TX and completion for the ones it sends), bound to queue 0 of the interface,
 * and the XDP program on the interface that redirects queue 0's frames to it. Zero-copy is tried
 * first only on an interface with a device behind it (a NIC whose driver may have it); a veth
 * has none, and a socket there runs in copy mode: the kernel copies each received frame into a
 * UMEM frame (in the XDP path of the sender's veth transmit) and each sent frame out of one into
 * an skb (within our sendto).
 *
 * The XDP program is six instructions, loaded with the bpf() syscall:
 *     r2 = ctx->rx_queue_index
 *     r1 = the XSKMAP (one entry: queue 0's socket)
 *     r3 = XDP_PASS                 what a frame does when the map has no socket for its queue
 *     call bpf_redirect_map         -> XDP_REDIRECT, or r3
 *     exit
 * and attached with BPF_LINK_CREATE, so the kernel detaches it when the link's last descriptor
 * closes, whatever way the process ends. A program left attached the old way (netlink, not a
 * link) would make the link's creation fail with EBUSY: the Python side (native/xsk.py) looks
 * for one and replaces it first.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "xsk.h"

#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef SOL_XDP
#define SOL_XDP 283
#endif
#ifndef XDP_PKT_CONTD
#define XDP_PKT_CONTD (1 << 0)     /* a frame continued in the next descriptor (never without XDP_USE_SG) */
#endif

/* Frames the kernel may hold for us before it drops (a burst that comes while the loop waits for a
 * CPU: with 256, a saturated switch sharing 2 cores lost half the frames at its RX ring, where an
 * AF_PACKET socket's 4 MiB buffer, some thousands of small frames, lost none) and frames in flight
 * out. The UMEM is pinned memory: 2,048 frames of 2 KiB, 4 MiB a port (the lab's memory plan
 * counts them: aifabric/lab/memory_plan.py). The RX and fill rings have room for every RX frame. */
#define RX_FRAMES 1792
#define RX_RING 2048
#define TX_FRAMES 256
/* a frame of an interface with a standard MTU fits the smallest UMEM frame the kernel takes,
 * after the headroom it keeps in front of a received frame */
#define SMALL_FRAME 2048
#define LARGE_FRAME 4096
#define VLAN_SLACK 4                /* a tagged frame: the MTU plus 14 bytes of header plus a tag */
#define MAX_KICKS 64                /* sendto calls to empty a TX ring (32 frames each at most) */

typedef struct ring {
    uint32_t *producer, *consumer, *flags;
    void *descs;                    /* struct xdp_desc[] (RX, TX) or uint64_t[] (fill, completion) */
    uint32_t mask;
    uint32_t head;                  /* ours: the producer we write (fill, TX) or the consumer we read (RX, completion) */
    void *map;
    size_t map_len;
} ring;

struct ss_xsk {
    int fd, map_fd, prog_fd, link_fd;
    int ifindex;
    int zero_copy, generic;
    uint32_t frame_size, max_frame;
    uint8_t *umem;
    size_t umem_len;
    ring fill, comp, rx, tx;
    uint64_t tx_free[TX_FRAMES];    /* TX frames not in flight */
    uint32_t tx_free_n;
    uint32_t tx_counted;            /* the TX consumer index up to which frames were counted taken */
    uint32_t kernel_seen;           /* TX descriptors the kernel may have read (a bound: see retract) */
    int down, gone;                 /* the last send met ENETDOWN / ENXIO (interface removed) */
};

static long bpf(int cmd, union bpf_attr *attr) { return syscall(__NR_bpf, cmd, attr, sizeof *attr); }

static int fail(char *why, size_t cap, const char *step, int err) {
    const char *hint = "";
    if (err == ERANGE) hint = " (the MTU of the interface's peer is too large for XDP)";
    else if (err == EBUSY) hint = " (taken: by another AF_XDP socket or XDP program)";
    else if (err == ENOSPC) hint = " (fewer RX queues than its peer has TX queues)";
    snprintf(why, cap, "%s: %s%s", step, strerror(err), hint);
    return err;
}

/* ---- rings ------------------------------------------------------------------------------ */
static int map_ring(ss_xsk *x, ring *r, const struct xdp_ring_offset *off, uint32_t n, size_t desc_size,
                    off_t pgoff) {
    r->map_len = off->desc + n * desc_size;
    r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, x->fd, pgoff);
    if (r->map == MAP_FAILED) { r->map = NULL; return errno; }
    r->producer = (uint32_t *)((uint8_t *)r->map + off->producer);
    r->consumer = (uint32_t *)((uint8_t *)r->map + off->consumer);
    r->flags = (uint32_t *)((uint8_t *)r->map + off->flags);
    r->descs = (uint8_t *)r->map + off->desc;
    r->mask = n - 1;
    return 0;
}

static inline uint32_t load(const uint32_t *index) { return __atomic_load_n(index, __ATOMIC_ACQUIRE); }
static inline void store(uint32_t *index, uint32_t v) { __atomic_store_n(index, v, __ATOMIC_RELEASE); }

/* ---- the socket ------------------------------------------------------------------------- */
static void teardown_socket(ss_xsk *x) {
    ring *rings[] = { &x->fill, &x->comp, &x->rx, &x->tx };
    for (int i = 0; i < 4; i++)
        if (rings[i]->map) munmap(rings[i]->map, rings[i]->map_len);
    memset(&x->fill, 0, 4 * sizeof(ring));
    if (x->fd >= 0) close(x->fd);
    x->fd = -1;
}

/* socket, UMEM registration, rings, the fill ring filled, bound: 0 or errno (why says which step) */
static int setup_socket(ss_xsk *x, uint16_t bind_flags, char *why, size_t cap) {
    x->fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (x->fd < 0) return fail(why, cap, "AF_XDP socket", errno);
    struct xdp_umem_reg reg = { .addr = (uintptr_t)x->umem, .len = x->umem_len, .chunk_size = x->frame_size };
    if (setsockopt(x->fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof reg) < 0)
        return fail(why, cap, "AF_XDP UMEM registration", errno);
    int sizes[] = { RX_RING, TX_FRAMES, RX_RING, TX_FRAMES };
    int opts[] = { XDP_UMEM_FILL_RING, XDP_UMEM_COMPLETION_RING, XDP_RX_RING, XDP_TX_RING };
    for (int i = 0; i < 4; i++)
        if (setsockopt(x->fd, SOL_XDP, opts[i], &sizes[i], sizeof sizes[i]) < 0)
            return fail(why, cap, "AF_XDP rings", errno);
    struct xdp_mmap_offsets off;
    socklen_t len = sizeof off;
    if (getsockopt(x->fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &len) < 0)
        return fail(why, cap, "AF_XDP ring offsets", errno);
    int err;
    if ((err = map_ring(x, &x->fill, &off.fr, RX_RING, sizeof(uint64_t), XDP_UMEM_PGOFF_FILL_RING))
        || (err = map_ring(x, &x->comp, &off.cr, TX_FRAMES, sizeof(uint64_t), XDP_UMEM_PGOFF_COMPLETION_RING))
        || (err = map_ring(x, &x->rx, &off.rx, RX_RING, sizeof(struct xdp_desc), XDP_PGOFF_RX_RING))
        || (err = map_ring(x, &x->tx, &off.tx, TX_FRAMES, sizeof(struct xdp_desc), XDP_PGOFF_TX_RING)))
        return fail(why, cap, "AF_XDP ring mapping", err);
    /* the first RX_FRAMES frames are lent to the kernel for receiving, the rest are for sending */
    uint64_t *fill = x->fill.descs;
    for (uint32_t i = 0; i < RX_FRAMES; i++) fill[i] = (uint64_t)i * x->frame_size;
    x->fill.head = RX_FRAMES;
    store(x->fill.producer, x->fill.head);
    x->tx_free_n = 0;
    for (uint32_t i = 0; i < TX_FRAMES; i++) x->tx_free[x->tx_free_n++] = (uint64_t)(RX_FRAMES + i) * x->frame_size;
    /* room for every TX frame's skb in the send buffer (each counts its truesize until it is freed):
     * the ring, not the buffer, is what limits frames in flight. Root may force it past wmem_max. */
    int sndbuf = TX_FRAMES * (x->frame_size + 2048);
    if (setsockopt(x->fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf) < 0)
        setsockopt(x->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    struct sockaddr_xdp sxdp = { .sxdp_family = AF_XDP, .sxdp_flags = bind_flags | XDP_USE_NEED_WAKEUP,
                                 .sxdp_ifindex = (uint32_t)x->ifindex, .sxdp_queue_id = 0 };
    if (bind(x->fd, (struct sockaddr *)&sxdp, sizeof sxdp) < 0)
        return fail(why, cap, bind_flags & XDP_ZEROCOPY ? "AF_XDP bind (zero-copy) on queue 0" :
                    "AF_XDP bind on queue 0", errno);
    x->zero_copy = !!(bind_flags & XDP_ZEROCOPY);
    return 0;
}

/* ---- the XDP program -------------------------------------------------------------------- */
#define INSN(c, d, s, o, i) ((struct bpf_insn){ .code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i) })

static int load_program(ss_xsk *x, char *why, size_t cap) {
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_type = BPF_MAP_TYPE_XSKMAP;
    attr.key_size = attr.value_size = sizeof(uint32_t);
    attr.max_entries = 1;
    strcpy(attr.map_name, "ss_xsks");
    x->map_fd = (int)bpf(BPF_MAP_CREATE, &attr);
    if (x->map_fd < 0) return fail(why, cap, "XSKMAP creation", errno);
    struct bpf_insn prog[] = {
        INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_1, offsetof(struct xdp_md, rx_queue_index), 0),
        INSN(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, x->map_fd),
        INSN(0, 0, 0, 0, 0),                          /* the upper half of the 64-bit immediate */
        INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_3, 0, 0, XDP_PASS),
        INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_redirect_map),
        INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
    };
    char log[1024] = "";
    memset(&attr, 0, sizeof attr);
    attr.prog_type = BPF_PROG_TYPE_XDP;
    attr.expected_attach_type = BPF_XDP;
    attr.insns = (uintptr_t)prog;
    attr.insn_cnt = sizeof prog / sizeof prog[0];
    attr.license = (uintptr_t)"Apache-2.0";      /* the project's; the program calls no GPL-only helper */
    attr.log_buf = (uintptr_t)log;
    attr.log_size = sizeof log;
    attr.log_level = 1;
    strcpy(attr.prog_name, "ss_xsk_redirect");
    x->prog_fd = (int)bpf(BPF_PROG_LOAD, &attr);
    if (x->prog_fd < 0) {
        int err = errno;
        snprintf(why, cap, "XDP program load: %s%s%.200s", strerror(err), log[0] ? ": " : "", log);
        return err;
    }
    uint32_t key = 0, value = (uint32_t)x->fd;
    memset(&attr, 0, sizeof attr);
    attr.map_fd = (uint32_t)x->map_fd;
    attr.key = (uintptr_t)&key;
    attr.value = (uintptr_t)&value;
    if (bpf(BPF_MAP_UPDATE_ELEM, &attr) < 0) return fail(why, cap, "XSKMAP update", errno);
    return 0;
}

/* the program on the interface by a link: the driver's XDP, else the kernel's generic XDP (an
 * interface whose driver has none) */
static int attach_program(ss_xsk *x, char *why, size_t cap) {
    uint32_t modes[] = { XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE };
    int err = 0;
    for (int i = 0; i < 2; i++) {
        union bpf_attr attr;
        memset(&attr, 0, sizeof attr);
        attr.link_create.prog_fd = (uint32_t)x->prog_fd;
        attr.link_create.target_ifindex = (uint32_t)x->ifindex;
        attr.link_create.attach_type = BPF_XDP;
        attr.link_create.flags = modes[i];
        x->link_fd = (int)bpf(BPF_LINK_CREATE, &attr);
        if (x->link_fd >= 0) {
            x->generic = modes[i] == XDP_FLAGS_SKB_MODE;
            return 0;
        }
        err = errno;
        if (err != EOPNOTSUPP) break;
    }
    return fail(why, cap, "XDP program attach", err);
}

/* ---- open and close --------------------------------------------------------------------- */
ss_xsk *ss_xsk_open(int ifindex, char *why, size_t cap, int *err) {
    char name[IF_NAMESIZE], path[64 + IF_NAMESIZE];
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    *err = 0;
    if (!if_indextoname((unsigned)ifindex, name)) { *err = fail(why, cap, "interface", errno); return NULL; }
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    memcpy(ifr.ifr_name, name, sizeof name);
    int mtu_ok = s >= 0 && ioctl(s, SIOCGIFMTU, &ifr) == 0;
    if (s >= 0) close(s);
    if (!mtu_ok) { *err = fail(why, cap, "interface MTU", errno); return NULL; }
    uint32_t longest = (uint32_t)ifr.ifr_mtu + 14 + VLAN_SLACK;
    uint32_t frame_size = longest <= SMALL_FRAME - XDP_PACKET_HEADROOM ? SMALL_FRAME : LARGE_FRAME;
    if (longest > frame_size - XDP_PACKET_HEADROOM) {
        snprintf(why, cap, "MTU %d: frames longer than an AF_XDP frame of %d bytes holds", ifr.ifr_mtu,
                 LARGE_FRAME - XDP_PACKET_HEADROOM);
        *err = EMSGSIZE;
        return NULL;
    }
    ss_xsk *x = calloc(1, sizeof *x);
    if (!x) { *err = fail(why, cap, "AF_XDP socket", ENOMEM); return NULL; }
    x->fd = x->map_fd = x->prog_fd = x->link_fd = -1;
    x->ifindex = ifindex;
    x->frame_size = frame_size;
    x->max_frame = frame_size - XDP_PACKET_HEADROOM;
    x->umem_len = (size_t)(RX_FRAMES + TX_FRAMES) * frame_size;
    x->umem = mmap(NULL, x->umem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (x->umem == MAP_FAILED) {
        x->umem = NULL;
        *err = fail(why, cap, "AF_XDP UMEM", errno);
        ss_xsk_close(x);
        return NULL;
    }
    /* zero-copy needs a driver that has it: only an interface with a device behind it may */
    snprintf(path, sizeof path, "/sys/class/net/%s/device", name);
    if (access(path, F_OK) == 0 && setup_socket(x, XDP_ZEROCOPY, why, cap) != 0) teardown_socket(x);
    if ((x->fd < 0 && (*err = setup_socket(x, XDP_COPY, why, cap)))
        || (*err = load_program(x, why, cap)) || (*err = attach_program(x, why, cap))) {
        ss_xsk_close(x);
        return NULL;
    }
    why[0] = '\0';
    return x;
}

void ss_xsk_close(ss_xsk *x) {
    if (!x) return;
    if (x->link_fd >= 0) close(x->link_fd);     /* the program leaves the interface */
    teardown_socket(x);
    if (x->prog_fd >= 0) close(x->prog_fd);
    if (x->map_fd >= 0) close(x->map_fd);
    if (x->umem) munmap(x->umem, x->umem_len);
    free(x);
}

int ss_xsk_fd(const ss_xsk *x) { return x->fd; }
int ss_xsk_gone(ss_xsk *x) {          /* asked when a socket of the port says its interface is down */
    char name[IF_NAMESIZE];
    if (!x->gone && !if_indextoname((unsigned)x->ifindex, name) && errno == ENXIO) x->gone = 1;
    return x->gone;
}
uint32_t ss_xsk_tx_waiting(const ss_xsk *x) { return x->tx.head - load(x->tx.consumer); }

void ss_xsk_info_get(const ss_xsk *x, ss_xsk_info *out) {
    struct xdp_statistics st;
    socklen_t len = sizeof st;
    memset(&st, 0, sizeof st);
    if (getsockopt(x->fd, SOL_XDP, XDP_STATISTICS, &st, &len) < 0) memset(&st, 0, sizeof st);
    *out = (ss_xsk_info){ x->zero_copy, x->generic, x->frame_size, x->max_frame,
                          st.rx_dropped + st.rx_ring_full, ss_xsk_tx_waiting(x) };
}

/* ---- receiving -------------------------------------------------------------------------- */
uint32_t ss_xsk_rx(ss_xsk *x, ss_xsk_frame *frames, uint32_t max) {
    uint32_t avail = load(x->rx.producer) - x->rx.head;
    uint32_t n = avail < max ? avail : max;
    const struct xdp_desc *d = x->rx.descs;
    for (uint32_t i = 0; i < n; i++) {
        const struct xdp_desc *desc = &d[(x->rx.head + i) & x->rx.mask];
        /* the kernel writes whole frames within one UMEM frame: anything else is not a frame */
        int whole = desc->addr < x->umem_len && desc->len <= x->max_frame
                    && (desc->addr % x->frame_size) + desc->len <= x->frame_size && !(desc->options & XDP_PKT_CONTD);
        frames[i] = (ss_xsk_frame){ whole ? x->umem + desc->addr : NULL, desc->len };
    }
    return n;
}

void ss_xsk_rx_done(ss_xsk *x, uint32_t n) {
    const struct xdp_desc *d = x->rx.descs;
    uint64_t *fill = x->fill.descs;
    for (uint32_t i = 0; i < n; i++) {      /* each frame back to the fill ring, whole */
        uint64_t chunk = d[(x->rx.head + i) & x->rx.mask].addr / x->frame_size * x->frame_size;
        if (chunk < (uint64_t)RX_FRAMES * x->frame_size) fill[x->fill.head++ & x->fill.mask] = chunk;
    }
    store(x->fill.producer, x->fill.head);
    x->rx.head += n;
    store(x->rx.consumer, x->rx.head);
    /* a zero-copy driver that ran out of frames waits to be told there are more */
    if (x->zero_copy && (*x->fill.flags & XDP_RING_NEED_WAKEUP)) recvfrom(x->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
}

/* ---- sending ---------------------------------------------------------------------------- */
static void reclaim(ss_xsk *x) {     /* frames the kernel is done with back to the TX free list */
    uint32_t avail = load(x->comp.producer) - x->comp.head;
    const uint64_t *done = x->comp.descs;
    for (uint32_t i = 0; i < avail && x->tx_free_n < TX_FRAMES; i++)
        x->tx_free[x->tx_free_n++] = done[(x->comp.head + i) & x->comp.mask];
    x->comp.head += avail;
    store(x->comp.consumer, x->comp.head);
}

/* The interface went down (or away) with frames in the TX ring: those the kernel cannot have
 * read are taken back and lost, as an AF_PACKET send to a down interface loses its frame (left
 * there, they would leave when it came up again, long after). In copy mode the kernel reads the
 * ring only within our sendto and poll calls, and refreshes what it knows of our producer only
 * when it took all it knew: kernel_seen bounds it. A zero-copy driver reads it any time: those
 * stay. Answers the frames taken back. */
static uint32_t retract(ss_xsk *x) {
    uint32_t from = load(x->tx.consumer);
    if (x->zero_copy || (int32_t)(x->kernel_seen - from) > 0) from = x->kernel_seen;
    uint32_t n = x->tx.head - from;
    const struct xdp_desc *d = x->tx.descs;
    for (uint32_t i = 0; i < n; i++) x->tx_free[x->tx_free_n++] = d[(from + i) & x->tx.mask].addr;
    x->tx.head = from;
    store(x->tx.producer, x->tx.head);
    return n;
}

/* Copy mode: the kernel sends the TX ring's frames within sendto, up to 32 a call, so call until
 * it took them all; it answers EBUSY when the device dropped one (NET_XMIT_DROP: the veth peer's
 * ring full, the peer down; it was taken), EAGAIN when its call's budget ran out (more) or it
 * has no room now (they wait for a later call), ENETDOWN or ENXIO when the interface is down or
 * gone. Zero-copy: the driver sends them; it is only woken. Answers frames taken back. */
static uint32_t kick(ss_xsk *x, uint32_t *dropped) {
    if (x->zero_copy) {
        x->kernel_seen = x->tx.head;
        if (*x->tx.flags & XDP_RING_NEED_WAKEUP) sendto(x->fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
        return 0;
    }
    int stalled = 0;
    for (int i = 0; i < MAX_KICKS; i++) {
        uint32_t before = load(x->tx.consumer);
        if (before == x->tx.head) return 0;
        int e = sendto(x->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) < 0 ? errno : 0;
        if (e == ENETDOWN || e == ENXIO) {
            if (e == ENXIO) x->gone = 1; else x->down = 1;
            return retract(x);
        }
        x->kernel_seen = x->tx.head;
        if (e == EBUSY) { (*dropped)++; continue; }
        if (load(x->tx.consumer) != before) continue;
        if (e != EAGAIN || stalled++) return 0;     /* no room: they wait for the next call */
        reclaim(x);                                 /* (a full completion ring also answers EAGAIN) */
    }
    return 0;
}

void ss_xsk_tx(ss_xsk *x, const ss_xsk_frame *frames, uint32_t n, uint32_t *taken, uint32_t *lost) {
    uint32_t dropped = 0, refused = 0, i = 0;
    if (x->down && !x->gone) {          /* up again? (a send to a down interface fails at once) */
        if (sendto(x->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) < 0 && errno == ENETDOWN) i = n, refused = n;
        else x->down = 0, x->kernel_seen = x->tx.head;
    }
    if (x->gone) i = n, refused = n;
    reclaim(x);
    for (; i < n; i++) {
        uint32_t len = frames[i].len;
        if (len > x->frame_size) { refused++; continue; }   /* longer than the port takes: lost, not sent cut */
        if (!x->tx_free_n || x->tx.head - load(x->tx.consumer) > x->tx.mask) {
            store(x->tx.producer, x->tx.head);
            refused += kick(x, &dropped);
            reclaim(x);
            if (x->down || x->gone || !x->tx_free_n || x->tx.head - load(x->tx.consumer) > x->tx.mask) {
                refused += n - i;       /* no room: lost, as when a socket's send buffer is full */
                break;
            }
        }
        uint64_t addr = x->tx_free[--x->tx_free_n];
        memcpy(x->umem + addr, frames[i].data, len);
        ((struct xdp_desc *)x->tx.descs)[x->tx.head++ & x->tx.mask] = (struct xdp_desc){ addr, len, 0 };
    }
    store(x->tx.producer, x->tx.head);
    refused += kick(x, &dropped);
    uint32_t consumed = load(x->tx.consumer) - x->tx_counted;
    x->tx_counted += consumed;
    *taken = consumed - dropped;
    *lost = dropped + refused;
}

/* ---- a leftover's name ------------------------------------------------------------------ */
int ss_xsk_program_name(uint32_t id, char *name, size_t cap) {
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.prog_id = id;
    int fd = (int)bpf(BPF_PROG_GET_FD_BY_ID, &attr);
    if (fd < 0) return -errno;
    struct bpf_prog_info info;
    memset(&info, 0, sizeof info);
    memset(&attr, 0, sizeof attr);
    attr.info.bpf_fd = (uint32_t)fd;
    attr.info.info_len = sizeof info;
    attr.info.info = (uintptr_t)&info;
    int rc = bpf(BPF_OBJ_GET_INFO_BY_FD, &attr) < 0 ? -errno : 0;
    close(fd);
    if (!rc) snprintf(name, cap, "%s", info.name);
    return rc;
}
