/* softswitch's AF_XDP port I/O (xsk.c): what the native data plane (dataplane.c) calls to read
 * and write a port's frames through an AF_XDP socket instead of its AF_PACKET socket.
 *
 * One socket per port, bound to queue 0 of the port's interface, with a UMEM of its own (RX
 * frames lent to the kernel through the fill ring, TX frames taken back from the completion
 * ring) and an XDP program on the interface that redirects every frame of queue 0 to it
 * (XSKMAP; a frame of another queue, or one when no socket is in the map, goes on to the kernel's
 * stack, where the port's AF_PACKET socket, which stays open, reads it). The program is attached
 * with a BPF link, so it goes when its last descriptor closes: at ss_xsk_close, and with the
 * process whatever way it ends. No libbpf or libxdp: the bpf() syscall, <linux/if_xdp.h> and mmap.
 *
 * The data plane's loop is the only user of a socket after it is open (no locking here). */
#ifndef SOFTSWITCH_NATIVE_XSK_H
#define SOFTSWITCH_NATIVE_XSK_H

#include <stddef.h>
#include <stdint.h>

typedef struct ss_xsk ss_xsk;

/* a frame: ss_xsk_rx hands out pointers into the socket's UMEM (data NULL: a descriptor that
 * names no whole frame, counted by the caller); ss_xsk_tx copies the caller's into its UMEM */
typedef struct ss_xsk_frame { uint8_t *data; uint32_t len; } ss_xsk_frame;

typedef struct ss_xsk_info {
    int32_t zero_copy;      /* 0: copy mode (the kernel copies each frame into and out of the UMEM) */
    int32_t generic;        /* 1: the XDP program runs in the kernel's generic (skb) mode, not the driver's */
    uint32_t frame_size;    /* bytes of a UMEM frame */
    uint32_t max_frame;     /* the longest frame the socket receives whole */
    uint64_t rx_dropped;    /* frames the kernel dropped for want of a free frame or room in the RX ring */
    uint64_t tx_waiting;    /* frames handed to the kernel and not taken yet */
} ss_xsk_info;

/* the socket on queue 0 of interface ifindex, its rings and the XDP program that feeds it:
 * NULL when it cannot be had, why (naming the step and the kernel's error) in why[0:cap] and
 * the errno in *err (EBUSY: the queue or the interface's XDP is taken, perhaps by a process
 * that is ending) */
ss_xsk *ss_xsk_open(int ifindex, char *why, size_t cap, int *err);
int ss_xsk_fd(const ss_xsk *x);                 /* readable (EPOLLIN) when frames wait */
/* up to max received frames, oldest first, valid until ss_xsk_rx_done gives them back */
uint32_t ss_xsk_rx(ss_xsk *x, ss_xsk_frame *frames, uint32_t max);
void ss_xsk_rx_done(ss_xsk *x, uint32_t n);
/* frames out in order, after any the kernel had not taken yet: *taken = frames the kernel took
 * (these and earlier ones), *lost = frames lost (dropped by the device, too long for the port,
 * no room, the interface down or gone). n 0: only the waiting ones. Frames the kernel cannot
 * take now wait (ss_xsk_tx_waiting) for the next call. */
void ss_xsk_tx(ss_xsk *x, const ss_xsk_frame *frames, uint32_t n, uint32_t *taken, uint32_t *lost);
uint32_t ss_xsk_tx_waiting(const ss_xsk *x);
int ss_xsk_gone(ss_xsk *x);                     /* 1: the interface was removed (the socket is unbound) */
void ss_xsk_info_get(const ss_xsk *x, ss_xsk_info *out);
void ss_xsk_close(ss_xsk *x);                   /* detaches the program, closes the socket, frees the UMEM */
/* the name of BPF program id (what a leftover on an interface is called): 0, or -errno */
int ss_xsk_program_name(uint32_t id, char *name, size_t cap);

#endif
