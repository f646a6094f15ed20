"""Hosts that honour 802.1Qbb priority flow control, as a RoCE NIC does (the switches' side is
softswitch/pfc.py; the fabric's classes are controller.lossless's).

A real NIC takes the PFC frames its switch sends and holds its send queue of the paused class.
Here the host's "NIC" is two eBPF TC programs on its interface (bpf/pause.c, loaded once for a
whole lab by `HostPause`): the ingress one takes PFC frames (and drops them, as a MAC does) and
keeps, per host and class, until when the class is paused; the host's senders
(hostagent.traffic.sender with ``--pause``) read that state before each datagram of a class
and hold the class's flows while it is paused, their schedules moved on by the paused time (a
NIC's queue waits; it does not burst to catch up). The egress program counts what each class
sent while it was paused: zero is the proof that the hold holds (what was already in the host's
qdisc still leaves: the switch's headroom absorbs it, with what is on the wire).

    pause = HostPause()                                   # compiles bpf/pause.c (bcc, about a second)
    host = pause.attach("h1-eth0", "/proc/1234/ns/net", 10_000_000, {26: 3}, peer_mac="00:00:00:00:01:01")
    pause.sender_arg(host)                                # "MAP_ID:HOST_ID", a sender's --pause
    pause.counters(host)                                  # {class: PauseCounters}
    pause.close()
"""
from hostagent.lossless.host import HostPause
from hostagent.lossless.pause import PauseCounters, PauseReader

__all__ = ["HostPause", "PauseCounters", "PauseReader"]
