"""P4Switch's queue bit rate: on softswitch the command goes to the target and is recorded, so
a restarted target gets it again (as a packet rate is); BMv2, which limits queues in packets per
second alone, refuses it saying so and records nothing."""
from __future__ import annotations

import pytest

from emulation.p4switch import P4Switch, P4SwitchError


def _switch(target_kind: str) -> tuple[P4Switch, list[str]]:
    """A P4Switch as its run-time control sees it (no Mininet node, no target): the commands it
    sends are listed."""
    sw = object.__new__(P4Switch)
    sw.name, sw.target_kind, sw.queue_settings = "s1", target_kind, []
    sent: list[str] = []
    sw.runtime_command = sent.append
    return sw, sent


def test_softswitch_gets_a_bit_rate_and_keeps_it_for_a_restart():
    sw, sent = _switch("softswitch")
    sw.set_queue_rate(100, 1)
    sw.set_queue_bitrate(10**9, 2)
    sw.set_queue_bitrate(0)
    assert sent == sw.queue_settings == ["set_queue_rate 100 1", "set_queue_bitrate 1000000000 2",
                                         "set_queue_bitrate 0"]


def test_bmv2_refuses_a_bit_rate_naming_its_packet_rate():
    sw, sent = _switch("bmv2")
    with pytest.raises(P4SwitchError, match=r"switch s1: BMv2 limits queues only in packets/s \(set_queue_rate\)"):
        sw.set_queue_bitrate(10**9, 2)
    assert sent == sw.queue_settings == []
