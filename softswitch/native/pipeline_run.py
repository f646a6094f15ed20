"""One frame through a program's pipeline alone, natively and on the Python path, step for step.

``NativePipeline`` builds a program's native library without the data plane (native/build.py,
``with_dataplane=False``), makes its run-time objects and mirrors the Python objects into them
(objects.py); ``run`` passes a frame through frame_run.c's ``ss_run_frame``. ``python_run`` does
the same steps on the Python path (packet_path.py's straight path: arrival metadata, parse,
checksum check, ingress; egress as if the packet departed at once, checksum update, deparse and
payload), so the two can be compared frame by frame and slot by slot (the differential tests)
and the native one timed (benchmarks/native_pipeline.py).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

from ..pipeline.program import Program
from .build import NativeBuilder
from .codegen import Native, generate
from .objects import NativeObjects

SENT, DROPPED_INGRESS, DROPPED_EGRESS, AFTER_INGRESS, MULTICAST = 0, 1, 2, 3, 4
REPLICATION = 5        # packet_path.REPLICATION
DROP_PORT = 511
NO_TRUNCATION = 1 << 62
MAX_FRAME = 16384
STATUS_NAMES = {1: "abort", 2: "bad_index", 3: "div_zero", 4: "too_long", 5: "unsupported"}


@dataclass
class FrameResult:
    outcome: str                  # sent, dropped_ingress, dropped_egress, after_ingress, error:<status>
    frame: bytes                  # the frame sent (empty otherwise)
    state: list[int]              # the packet state at the end, slot by slot (the Python path's values)


def outcome_name(code: int) -> str:
    names = {SENT: "sent", DROPPED_INGRESS: "dropped_ingress", DROPPED_EGRESS: "dropped_egress",
             AFTER_INGRESS: "after_ingress", MULTICAST: "multicast"}
    return names[code] if code >= 0 else f"error:{STATUS_NAMES.get(-code, -code)}"


class NativePipeline:
    """A program's native pipeline and objects in this process, mirroring ``program``'s objects."""

    def __init__(self, program: Program, cache_dir: Path | str | None = None):
        self.program = program
        self.native: Native = generate(program)
        self.lib = NativeBuilder(cache_dir, with_dataplane=False).load(self.native.source)
        lib = self.lib
        P, U32 = ctypes.c_void_p, ctypes.c_uint32
        lib.ss_run_frame.restype = ctypes.c_int
        lib.ss_run_frame.argtypes = [P, P, ctypes.c_char_p, U32, U32, ctypes.c_int, ctypes.c_int, U32, P, U32, P]
        lib.ss_time_frames.restype = ctypes.c_uint64
        lib.ss_time_frames.argtypes = [P, P, ctypes.c_char_p, U32, U32, U32, ctypes.c_int, P, U32, P]
        lib.ss_state_size.restype = ctypes.c_size_t
        lib.ss_slot_read.argtypes = [P, ctypes.c_int, P]
        self.objects = NativeObjects(program, self.native, lib)
        self.objects.attach()
        self.state = ctypes.create_string_buffer(lib.ss_state_size())
        self.out = ctypes.create_string_buffer(MAX_FRAME)
        self._signed = self._signed_slots()

    def close(self) -> None:
        self.objects.close()

    def _signed_slots(self) -> dict[int, int]:
        """slot -> width of every signed field (the native state holds them sign-extended)."""
        out = {}
        for hdr in self.program.layout.headers.values():
            for f in hdr.type.fields:
                if f.signed and f.width is not None:
                    out[hdr.base + 1 + f.index] = f.width
        return out

    def slots(self) -> list[int]:
        """The native packet state as the Python path holds it (signed fields negative; the
        payload slot, which the native state does not keep, left 0)."""
        pair = (ctypes.c_uint64 * 2)()
        values = []
        for slot in range(self.program.layout.size):
            self.lib.ss_slot_read(self.state, slot, pair)
            v = pair[0] | pair[1] << 64
            w = self._signed.get(slot)
            if w is not None:
                v &= (1 << w) - 1
                if v >> (w - 1):
                    v -= 1 << w
            values.append(v)
        return values

    def run(self, frame: bytes, port: int, stop_after_ingress: bool = False,
            replica: tuple[int, int] | None = None) -> FrameResult:
        """``replica``: (port, rid) of the one copy a multicast packet makes (None: it stops there)."""
        n = ctypes.c_uint32()
        rport, rid = replica if replica is not None else (-1, 0)
        code = self.lib.ss_run_frame(self.objects.o, self.state, frame, len(frame), port, int(stop_after_ingress),
                                     rport, rid, self.out, MAX_FRAME, ctypes.byref(n))
        sent = self.out.raw[:n.value] if code == SENT else b""
        return FrameResult(outcome_name(code), sent, self.slots())

    def time_frames(self, frame: bytes, port: int, n: int, replica_port: int = -1) -> tuple[float, str]:
        """CPU microseconds per frame of ``n`` runs of ``frame`` (a multicast one as one copy to
        ``replica_port``, rid 1), and the last run's outcome."""
        last = ctypes.c_int()
        ns = self.lib.ss_time_frames(self.objects.o, self.state, frame, len(frame), port, n, replica_port, self.out,
                                     MAX_FRAME, ctypes.byref(last))
        return ns / n / 1000, outcome_name(last.value)


def python_run(program: Program, frame: bytes, port: int, stop_after_ingress: bool = False,
               replica: tuple[int, int] | None = None) -> FrameResult:
    """``NativePipeline.run`` on the Python path (program's generated or compiled functions)."""
    from ..pipeline.helpers import Abort
    s, h = program.intrinsics, program.layout.hidden
    F = program.new_packet_state()
    F[s["ingress_port"]] = port
    length = len(frame)
    F[s["packet_length"]] = F[h["packet_length"]] = F[h["ingress_length"]] = length
    F[h["truncate_length"]] = NO_TRUNCATION

    def done(outcome: str, sent: bytes = b"") -> FrameResult:
        state = F[:]
        state[h["payload"]] = 0
        return FrameResult(outcome, sent, state)

    try:
        consumed = program.parse(F, frame)
        F[h["payload"]] = frame[consumed:]
        ok = program.verify_checksums(F)
        if s["checksum_error"] is not None:
            F[s["checksum_error"]] = 0 if ok else 1
        program.ingress(F)
        if stop_after_ingress:
            return done("after_ingress")
        if s["mcast_grp"] is not None and F[s["mcast_grp"]]:
            if replica is None:
                return done("multicast")
            F[s["instance_type"]] = REPLICATION
            egress, rid = replica
            if s["egress_rid"] is not None:
                F[s["egress_rid"]] = rid
            F[h["truncate_length"]] = NO_TRUNCATION
        else:
            egress = F[s["egress_spec"]]
            if egress == DROP_PORT:
                return done("dropped_ingress")
            F[s["instance_type"]] = 0
        F[s["egress_port"]] = egress
        F[s["egress_spec"]] = (DROP_PORT + 1) & 0x1FF
        F[s["packet_length"]] = F[h["packet_length"]]
        program.egress(F)
        if F[s["egress_spec"]] == DROP_PORT:
            return done("dropped_egress")
        program.update_checksums(F)
        return done("sent", program.deparse(F) + F[h["payload"]])
    except Abort:
        return done("error:abort")
    except ZeroDivisionError:
        return done("error:div_zero")
    except IndexError:
        return done("error:bad_index")
