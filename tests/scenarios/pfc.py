"""802.1Qbb PFC on softswitch (softswitch/pfc.py), the same on its Python and native packet paths:
queueing.p4 forwards port 1 to port 2 in class 3 and port 3 to port 2 in class 1; class 3 is
lossless on ports 1 and 2, class 1 on port 2. A burst of ten 1000-byte frames into port 1 for a
400 kbit/s port 2 sends PAUSE (class 3, quanta 1000) out of port 1 at XOFF, refreshed, then XON;
all ten frames leave port 2. Malformed MAC control frames on port 2 are counted by reason and go
nowhere. A neighbour's PAUSE on port 2 holds class 3 (a frame waits) but not class 1; its XON lets
the frame go. The watchdog then breaks a pause that lasts (its queued frame dropped) and restores
PFC once the PAUSEs stop. Run-time control's figures (get_queue) are compared too. BMv2 has no
PFC: the scenario is softswitch's alone."""
import json
import time

from scenarios.queueing import PRIO_PORT, _normalise as _normalise_q
from scenarios.runner import CONTROL, Scenario, Send, Setup, Step
from softswitch.pfc import MAC_CONTROL, class_frame, parse_pfc

CLASS, OTHER = 3, 1
SIZE = 1000
HOST = bytes.fromhex("020000000077")
FIGURES = ("lossless", "at_xoff_frames", "at_xoff_bytes", "xon_sent", "buffer_bytes", "buffer_frames", "buffer_peak",
           "lossless_drops", "pause_received", "xon_received", "paused", "occupancy", "storm", "storms", "restores",
           "watchdog_drops", "tx_packets")


def _setup(s: Setup) -> None:
    fwd, act = "QIngress.fwd", "QIngress.set_port_priority"
    s.insert(*[s.p4info.table_entry(fwd, {"standard_metadata.ingress_port": i}, action=act,
                                    params={"port": 2, "priority": prio}) for i, prio in ((1, CLASS), (3, OTHER))])


def _frame(n: int) -> bytes:
    return bytes.fromhex("000000000002") + HOST + b"\x88\xb5" + n.to_bytes(4, "big") + bytes(SIZE - 18)


def _cli(*commands: str) -> Step:
    def run(s: Setup) -> bytes:
        s.switch_cli(*commands)
        return " / ".join(commands).encode()
    return Step(run)


def _figures(port: int, *classes: int, wait: float = 0.0) -> Step:
    """The classes' PFC figures and the port's malformed counts, as run-time control gives them."""
    def run(s: Setup) -> bytes:
        time.sleep(wait)
        view = json.loads(s.switch_cli(f"get_queue {port}"))
        rows = {c["priority"]: {k: c.get(k) for k in FIGURES} for c in view["classes"] if c["priority"] in classes}
        return json.dumps({"port": port, "classes": rows, "malformed": view["malformed"]}, sort_keys=True).encode()
    return Step(run)


PAUSE, XON = class_frame(HOST, CLASS, 65535), class_frame(HOST, CLASS, 0)
BURST = Send(1, _frame(0), repeat=10)
HELD = Send(1, _frame(20), expect_nothing=True)
PACKETS = [
    _cli("set_queue_bitrate 10000000", "set_queue_bitrate 400000 2",
         f"set_lossless {CLASS} 4500 1500 10000 1000 1", f"set_lossless {CLASS} 100000 50000 0 65535 2",
         f"set_lossless {OTHER} 100000 50000 0 65535 2"),
    BURST,
    _figures(1, CLASS, wait=0.3),
    Send(2, PAUSE[:20], expect_nothing=True),                                   # short
    Send(2, bytes.fromhex("ffffffffffff") + PAUSE[6:], expect_nothing=True),   # not to 01:80:c2:00:00:01
    Send(2, PAUSE[:14] + b"\x00\x01" + PAUSE[16:], expect_nothing=True),       # 802.3x PAUSE
    Send(2, PAUSE[:16] + b"\x01" + PAUSE[17:], expect_nothing=True),           # reserved bits set
    Send(2, PAUSE, expect_nothing=True),
    Send(3, _frame(120)),                       # class 1: not paused
    HELD,                                       # class 3: held
    _figures(2, CLASS, OTHER),
    Send(2, XON),                               # the held frame goes
    _cli("set_pfc_watchdog 100 100 10 drop"),
    Send(2, PAUSE, expect_nothing=True),
    Send(1, _frame(30), expect_nothing=True),   # held, then dropped by the watchdog
    _figures(2, CLASS, wait=0.3),               # the storm caught; no PAUSE since: restored 100 ms later
    _figures(2, CLASS, wait=0.3),
    Send(1, _frame(31)),                        # PFC honoured again, nothing pauses it
]


def _normalise(port: int, frame: bytes) -> bytes:
    """queueing.p4's timing fields blanked; a PFC frame's source, its port's address (each run's veths
    have theirs)."""
    return frame[:6] + bytes(6) + frame[12:] if frame[12:14] == MAC_CONTROL else _normalise_q(port, frame)


def _expect(outputs) -> None:
    burst = outputs[PACKETS.index(BURST)]
    pfc = [parse_pfc(f) for p, f in burst if p == 1]
    assert (1 << CLASS, tuple(1000 if c == CLASS else 0 for c in range(8))) in pfc, burst
    assert (1 << CLASS, (0,) * 8) in pfc, "no XON"
    assert len([f for p, f in burst if p == 2]) == 10
    figures = json.loads(outputs[PACKETS.index(BURST) + 1][0][1])["classes"][str(CLASS)]
    assert (figures["at_xoff_frames"], figures["at_xoff_bytes"], figures["buffer_peak"]) == (5, 5000, 9000)
    assert (figures["buffer_bytes"], figures["lossless_drops"], figures["xon_sent"]) == (0, 0, 1)
    i = PACKETS.index(HELD)
    assert outputs[i - 1] == [(2, outputs[i - 1][0][1])] and outputs[i] == []
    held = json.loads(outputs[i + 1][0][1])
    assert held["malformed"] == {"short": 1, "destination": 1, "opcode": 1, "reserved": 1}
    assert held["classes"][str(CLASS)]["paused"] and held["classes"][str(CLASS)]["occupancy"] == 1
    assert not held["classes"][str(OTHER)]["paused"]
    assert [p for p, _ in outputs[i + 2]] == [2]
    storm = json.loads(outputs[-3][0][1])["classes"][str(CLASS)]
    assert storm["storms"] == 1 and storm["watchdog_drops"] == 1
    assert json.loads(outputs[-2][0][1])["classes"][str(CLASS)]["restores"] == 1
    assert [p for p, _ in outputs[-1]] == [2]
    assert all(o[0][0] == CONTROL for o, p in zip(outputs, PACKETS) if isinstance(p, Step))


SCENARIOS = [Scenario("pfc", "queueing", PACKETS, setup=_setup, normalise=_normalise, expect=_expect,
                      ports=PRIO_PORT, not_bmv2="BMv2 has no priority flow control (no PAUSE frames, no "
                                                "buffer accounting): softswitch's Python and native paths only")]
