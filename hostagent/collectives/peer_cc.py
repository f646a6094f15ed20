"""A host congestion control per peer for the collectives' reliable transport (TIMELY or Swift,
`hostagent.congestion`): what the transport's own window and timers leave to it.

The transport asks each peer's control how many packets may be unacknowledged (its window, never
below one packet nor above the transport's own) and when the next packet may leave (its pacing
rate, where it sets one: TIMELY always, Swift below one packet of window). It hands the control
every acknowledgement that acked a packet sent once (Karn), as an RTT sample of the newest such
packet less the time the receiver held its acknowledgement back (acknowledgements are delayed and
batched, `reliable.ACK_EVERY`: that wait is the protocol's, not the network's; the receiver
writes it into the acknowledgement), and a retransmission timeout as a loss, at most once a
smoothed RTT. Resends leave unpaced: they are what the timeout already held back.
"""
from __future__ import annotations

import statistics
import time

from hostagent.congestion import AckSample, CcSettings, CongestionControl, settings_control

MAX_WAIT_S = 0.5          # a pacing gap never holds a send longer (a rate collapsed by timeouts recovers by acks)


class PeerControls:
    """One control per peer rank, the pacing clock of each, and counts for the report."""

    def __init__(self, settings: CcSettings, peers: int, frame_bytes: int, window: int) -> None:
        self.settings = settings
        self.frame_bits = frame_bytes * 8
        self.window_cap = window
        self.controls: list[CongestionControl] = [
            settings_control(settings, frame_bytes) for _ in range(peers)]
        self._next_send = [0.0] * peers     # time.monotonic() before which the peer's next packet waits
        self.samples = 0
        self.losses = 0
        self.paced_s = 0.0                  # time sends waited for their pacing gap, all peers

    def window(self, peer: int) -> int:
        """Packets that may be unacknowledged to ``peer``: the control's window, at least one and
        at most the transport's."""
        w = self.controls[peer].window_packets
        return self.window_cap if w is None else max(1, min(self.window_cap, int(w)))

    def pace(self, peer: int) -> float:
        """Reserve the next send to ``peer``; seconds the caller must wait before it (0: now)."""
        rate = self.controls[peer].rate_bps
        now = time.monotonic()
        if rate is None or rate <= 0:
            return 0.0
        start = max(now, self._next_send[peer])
        wait = min(start - now, MAX_WAIT_S)
        self._next_send[peer] = now + wait + self.frame_bits / rate
        self.paced_s += wait
        return wait

    def acked(self, peer: int, rtt_s: float, acked: int, seq: int, snd_nxt: int) -> None:
        self.samples += 1
        self.controls[peer].on_ack(AckSample(now_s=time.monotonic(), rtt_s=max(0.0, rtt_s), acked=acked, seq=seq,
                                             snd_nxt=snd_nxt))

    def timed_out(self, peer: int, srtt_s: float | None) -> None:
        """A packet to ``peer`` waited out its timeout: a loss to its control, once an RTT at most."""
        if self.controls[peer].timed_out(time.monotonic(), srtt_s or self.settings.base_rtt_s):
            self.losses += 1

    def stats(self, peers: list[int]) -> dict:
        """What the report shows of ``peers``' controls: their windows and rates now (medians),
        the samples and losses they took, the time sends waited for pacing."""
        windows = [c.window_packets for p in peers if (c := self.controls[p]).window_packets is not None]
        rates = [c.rate_bps for p in peers if (c := self.controls[p]).rate_bps is not None]
        return {"cc": self.settings.name, "cc_samples": self.samples, "cc_losses": self.losses,
                "cc_paced_s": round(self.paced_s, 3),
                "cc_window_median": round(statistics.median(windows), 3) if windows else None,
                "cc_rate_median_bps": round(statistics.median(rates)) if rates else None}
