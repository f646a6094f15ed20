"""softswitch's priority queues without packets: a queue made when a packet first needs it takes
its port's settings, the queues are served highest priority first, and bad sizes are named.
(That packets leave by priority, on softswitch and on BMv2, is the queueing scenario's.)"""
from __future__ import annotations

import pytest

from softswitch.dataplane import Dataplane


def _dataplane(**kw) -> Dataplane:
    return Dataplane({2: None, 3: None}, **kw)    # ports are only named here: nothing is sent


def test_a_queue_made_later_takes_its_port_settings_and_the_order_is_by_priority():
    dp = _dataplane(priority_queues=8)
    dp.set_queue_rate(100, 2)
    dp.set_queue_depth(8, 2)
    q7 = dp.queue(2, 7)                                   # after the settings: made with them
    assert (q7.port, q7.priority, q7.rate_pps, q7.depth) == (2, 7, 100, 8)
    assert dp.queue(3, 7).rate_pps == 0                   # another port keeps the defaults
    assert [(q.port, q.priority) for q in dp.port_queues(2)] == [(2, 7), (2, 0)]
    assert [q.priority for q in dp.queues.values()] == sorted((q.priority for q in dp.queues.values()), reverse=True)
    dp.set_queue_rate(50)                                 # every port: queues made and to be made
    assert {q.rate_pps for q in dp.queues.values()} == {50} and dp.queue(2, 3).rate_pps == 50
    assert dp.queue(2, 3).depth == 8                      # the port's own depth stays


def test_bad_priority_queue_counts_are_named():
    with pytest.raises(ValueError, match="9 priority queues per port is outside 1..8"):
        _dataplane(priority_queues=9)
    with pytest.raises(ValueError, match="0 priority queues"):
        _dataplane(priority_queues=0)
