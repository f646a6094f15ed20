"""The sender's side of a UDP flow under a host congestion control (`hostagent.congestion`).

Every datagram of such a flow asks to be acknowledged (the BTH AckReq bit); the receiver answers
each at once with the send time echoed and its own arrival and answer times
(`hostagent.traffic.wire`). An acknowledgement gives the control one sample: the RTT (send to
the acknowledgement's arrival here, both CLOCK_REALTIME, which every host of the lab shares) and
the receiver's share of it (Swift's host delay). The control answers with a window (datagrams in
flight, Swift) and/or a pacing rate (TIMELY; Swift below one datagram of window); the sender
(`hostagent.traffic.sender`) keeps to both.

A datagram not acknowledged within the retransmission timeout (``RTO_RTTS`` smoothed RTTs, at
least ``MIN_RTO_RTTS`` base RTTs) is given up as lost: it leaves the window, is counted
(``acks_missing``) and tells the control once per RTT at most. An acknowledgement that comes
after that (``acks_late``) is still an RTT sample: the echoed send time makes it one. The traffic tools do not resend:
the receiver's record counts the datagram lost as for any flow.
"""
from __future__ import annotations

import socket

from hostagent.congestion import AckSample, CongestionControl, CcSettings, settings_control
from hostagent.traffic.wire import unpack_ack

RTO_RTTS = 4.0              # the timeout in smoothed RTTs ...
MIN_RTO_RTTS = 8.0          # ... and at least this many base RTTs
SRTT_GAIN = 0.125           # RFC 6298's alpha
TRACE_EVERY_S = 0.01        # the flow's rate and window are recorded at most this often
MAX_ACKS_A_READ = 256


class Controlled:
    """One flow's control, its datagrams in flight and the acknowledgements read for it."""

    def __init__(self, settings: CcSettings, frame_bytes: int, record) -> None:
        self.control: CongestionControl = settings_control(settings, frame_bytes)
        self.frame_bits = frame_bytes * 8
        self.base_rtt_s = settings.base_rtt_s
        self.record = record                    # the flow's SentFlow: acks, acks_missing, rtt figures, trace
        self.in_flight: dict[int, int] = {}     # seq -> send ns, oldest first
        self.srtt_s: float | None = None
        self.sent_seqs = 0
        self.last_trace_s = float("-inf")

    # -- what the sender asks ------------------------------------------------------------------
    def window_open(self) -> bool:
        window = self.control.window_packets
        return window is None or len(self.in_flight) < max(1.0, window)

    def rate_pps(self) -> float | None:
        """The control's pacing rate in datagrams a second (None: no limit of its own)."""
        rate = self.control.rate_bps
        return None if rate is None else rate / self.frame_bits

    def sent(self, seq: int, send_ns: int) -> None:
        self.in_flight[seq] = send_ns
        self.sent_seqs = max(self.sent_seqs, seq + 1)

    # -- acknowledgements and timeouts -----------------------------------------------------------
    def read_acks(self, sock: socket.socket, flow_id: int, now_ns: int) -> bool:
        """Take the acknowledgements waiting on the flow's socket; True when any was taken."""
        took = False
        for _ in range(MAX_ACKS_A_READ):
            try:
                data = sock.recv(64, socket.MSG_DONTWAIT)     # the socket blocks for sends
            except (BlockingIOError, InterruptedError):
                break
            except OSError:            # an ICMP error queued on the socket: not an acknowledgement
                self.record.ack_errors += 1
                continue
            ack = unpack_ack(data)
            if ack is None or ack.flow_id != flow_id:
                self.record.ack_errors += 1
                continue
            if self.in_flight.pop(ack.seq, None) is None:
                self.record.acks_late += 1      # already given up as lost: its RTT still counts
            self._sample(ack, now_ns)
            took = True
        return took

    def _sample(self, ack, now_ns: int) -> None:
        rtt = max(0.0, (now_ns - ack.send_ns) / 1e9)
        host = min(rtt, max(0.0, (ack.ack_ns - ack.recv_ns) / 1e9))
        self.srtt_s = rtt if self.srtt_s is None else (1 - SRTT_GAIN) * self.srtt_s + SRTT_GAIN * rtt
        rec = self.record
        rec.acks += 1
        rec.rtt_min_us = round(rtt * 1e6, 1) if rec.rtt_min_us is None else min(rec.rtt_min_us, round(rtt * 1e6, 1))
        rec.rtt_sum_us += rtt * 1e6
        self.control.on_ack(AckSample(now_s=now_ns / 1e9, rtt_s=rtt, host_delay_s=host, acked=1, seq=ack.seq,
                                      snd_nxt=self.sent_seqs))
        self._trace(now_ns / 1e9)

    def rto_s(self) -> float:
        srtt = self.srtt_s if self.srtt_s is not None else self.base_rtt_s
        return max(RTO_RTTS * srtt, MIN_RTO_RTTS * self.base_rtt_s)

    def expire(self, now_ns: int) -> int:
        """Give up the datagrams older than the timeout; how many."""
        limit = now_ns - int(self.rto_s() * 1e9)
        lost = 0
        while self.in_flight:
            seq, sent_ns = next(iter(self.in_flight.items()))
            if sent_ns > limit:
                break
            del self.in_flight[seq]
            lost += 1
        if lost:
            self.record.acks_missing += lost
            now_s = now_ns / 1e9
            if self.control.timed_out(now_s, self.srtt_s or self.base_rtt_s):
                self._trace(now_s)
        return lost

    def _trace(self, now_s: float) -> None:
        if now_s - self.last_trace_s < TRACE_EVERY_S:
            return
        self.last_trace_s = now_s
        window, rate = self.control.window_packets, self.control.rate_bps
        self.record.cc_trace.append((round(now_s, 4), None if rate is None else round(rate),
                                     None if window is None else round(window, 3)))
