"""The copies a packet makes (simple_switch's clone and multicast): clone sessions at ingress and
egress, the field lists a copy keeps, and the copies to (port, replica id) targets, which go to
the egress queues. A mixin of the Python path's `Dataplane`, which provides ``program``, ``pre``
(its replication engine) and ``_path`` (its `PacketPath`)."""
from __future__ import annotations

from .packet_path import EGRESS_CLONE, INGRESS_CLONE, NO_TRUNCATION
from .pipeline.program import Program


class Copies:
    def clone_ingress(self, prog: Program, F: list, frame: bytes, session: int, ingress_port: int) -> None:
        targets = self.pre.clone_targets(session)
        if targets is None:
            return
        s = prog.intrinsics
        h = prog.layout.hidden
        # BMv2 parses the original packet again (with its ingress port), then resets the
        # metadata and copies in only the preserved field list.
        C = prog.new_packet_state()
        C[s["ingress_port"]] = ingress_port
        consumed = prog.parse(C, frame)
        C[h["payload"]] = frame[consumed:]
        for slot in prog.layout.metadata_slots:
            C[slot] = 0
        self.copy_field_list(prog, F[h["clone_field_list"]], F, C)
        C[s["instance_type"]] = INGRESS_CLONE
        C[h["packet_length"]] = C[h["ingress_length"]] = len(frame)
        self.replicate(C, targets, self._session_truncation(session))

    def clone_egress(self, prog: Program, F: list, session: int) -> None:
        targets = self.pre.clone_targets(session)
        if targets is None:
            return
        s = prog.intrinsics
        h = prog.layout.hidden
        C = F[:]                     # headers as egress left them, metadata reset
        for slot in prog.layout.metadata_slots:
            C[slot] = 0
        self.copy_field_list(prog, F[h["clone_field_list"]], F, C)
        C[s["instance_type"]] = EGRESS_CLONE
        for name in ("resubmit_field_list", "recirculate_field_list", "clone_field_list", "learn_id"):
            C[h[name]] = 0
        self.replicate(C, targets, self._session_truncation(session))

    def _session_truncation(self, session: int) -> int:
        sess = self.pre.sessions.get(session)
        return sess.packet_length_bytes if sess and sess.packet_length_bytes else NO_TRUNCATION

    @staticmethod
    def copy_field_list(prog: Program, field_list_id: int, src: list, dst: list) -> None:
        for slot in prog.field_lists.get(field_list_id, ()):
            dst[slot] = src[slot]

    def replicate(self, F: list, targets: list[tuple[int, int]], truncate: int) -> None:
        """Copies to (port, rid) targets. A copy is a new packet in BMv2: a truncate() the
        original asked for does not apply to it; only the clone session's length does."""
        prog = self.program
        rid_slot = prog.intrinsics["egress_rid"]
        trunc_slot = prog.layout.hidden["truncate_length"]
        enqueue = self._path.enqueue
        for port, rid in targets:
            copy = F[:]
            if rid_slot is not None:
                copy[rid_slot] = rid
            copy[trunc_slot] = truncate
            enqueue(port, copy)
