/* The CPU port's control side: packet-outs the Python side (P4Runtime) queues for the loop to
 * send, and the packet-ins the loop leaves in its ring for the Python side to take, each side
 * woken by an eventfd. */
#define _GNU_SOURCE                /* struct mmsghdr (state.h) */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "state.h"

int ss_dp_packet_out(ss_dataplane *dp, const uint8_t *frame, uint32_t len) {
    if (len > SS_MAX_FRAME || dp->cpu_port < 0) return -1;
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy) return -1;
    memcpy(copy, frame, len);
    pthread_mutex_lock(&dp->io_lock);
    if (dp->outs_count == dp->outs_cap) {
        uint32_t cap = dp->outs_cap ? dp->outs_cap * 2 : 16;
        ring_frame *grown = realloc(dp->outs, cap * sizeof(ring_frame));
        if (!grown) { pthread_mutex_unlock(&dp->io_lock); free(copy); return -1; }
        dp->outs = grown;
        dp->outs_cap = cap;
    }
    dp->outs[dp->outs_count].len = len;
    dp->outs[dp->outs_count].data = copy;
    dp->outs_count++;
    pthread_mutex_unlock(&dp->io_lock);
    uint64_t one = 1;
    if (write(dp->wakefd, &one, sizeof one) < 0) { /* full: readable anyway */ }
    return 0;
}

int ss_dp_packet_in_fd(const ss_dataplane *dp) { return dp->packet_in_fd; }

int ss_dp_packet_in(ss_dataplane *dp, uint8_t *buf, uint32_t cap) {
    pthread_mutex_lock(&dp->io_lock);
    if (!dp->ring_count) {
        uint64_t v;          /* nothing left: the eventfd read empty so a poll waits again */
        if (read(dp->packet_in_fd, &v, sizeof v) < 0) { /* EAGAIN */ }
        pthread_mutex_unlock(&dp->io_lock);
        return 0;
    }
    ring_frame *slot = &dp->ring[dp->ring_head];
    if (slot->len > cap) { pthread_mutex_unlock(&dp->io_lock); return -1; }
    uint32_t len = slot->len;
    memcpy(buf, slot->data, len);
    free(slot->data);
    dp->ring_head = (dp->ring_head + 1) % PACKET_IN_RING;
    dp->ring_count--;
    pthread_mutex_unlock(&dp->io_lock);
    return (int)len;
}
