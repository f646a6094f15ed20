"""softswitch's generated code against its reference paths, on every compiled program and
random packet states (any header valid or not, any field value, all-zero and all-one too):

- a csum16 calculation computed straight from the fields gives what packing the input bytes
  as BMv2 does and running hashes.csum16 on them gives;
- the structured ingress and egress controls leave the packet state exactly as running the
  same controls node by node does (tables empty: every table runs its default action).
"""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from softswitch.pipeline.helpers import Abort
from softswitch.pipeline.program import Program

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = [p for p in sorted([*REPO.glob("tests/p4/build/*.json"), REPO / "p4src/build/fabric.json"])
            if p.exists()]


def random_state(prog: Program, rng: random.Random) -> list:
    F = prog.new_packet_state()
    for hdr in prog.layout.headers.values():
        if not hdr.metadata:
            F[hdr.base] = rng.randrange(2)
        for f in hdr.type.fields:
            if f.width is not None:
                F[hdr.base + 1 + f.index] = rng.choice([0, (1 << f.width) - 1, rng.getrandbits(f.width)])
    return F


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_direct_csum16_is_the_reference(path: Path):
    prog = Program(path.read_text())
    direct = [c for c in prog.calculations.values() if c.direct is not None]
    if not direct:
        pytest.skip("no csum16 calculation without payload")
    rng = random.Random(path.stem)
    for F in [prog.new_packet_state()] + [random_state(prog, rng) for _ in range(300)]:
        for c in direct:
            assert c.direct(F) == c.algorithm(c.input_fn(F)), c.name


def _run(fn, F: list, seed: int) -> str:
    random.seed(seed)            # random() in a program draws the same numbers on both runs
    try:
        fn(F)
        return "ok"
    except Abort:
        return "abort"


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_structured_controls_are_the_node_loop(path: Path):
    text = path.read_text()
    fused, loop = Program(text), Program(text, fuse=False)
    rng = random.Random(path.stem)
    for i in range(200):
        F1 = random_state(fused, rng)
        F2 = F1[:]
        for a, b in ((fused.ingress, loop.ingress), (fused.egress, loop.egress)):
            assert _run(a, F1, i) == _run(b, F2, i)
            assert F1 == F2


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_action_locals_are_the_packet_state_slots(path: Path):
    """Temporaries kept in action locals (action_locals.py) change no field the packet state
    keeps: random states, both controls, compared field by field. A temporary starts at 0 in
    a real packet (metadata), so the reference's random state starts them at 0 too."""
    text = path.read_text()
    with_locals, slots = Program(text), Program(text, with_action_locals=False)
    local_slots = {slots.layout.field_ref(["scalars", f])[0] for f in with_locals.layout.action_locals}
    fields = [ref for hdr in with_locals.layout.headers.values()
              for ref in ([hdr.name, "$valid$"], *([hdr.name, f.name] for f in hdr.type.fields))]
    kept = [(slots.layout.field_ref(ref)[0], with_locals.layout.field_ref(ref)[0]) for ref in fields]
    kept += [(slots.layout.headers[h.name].varbit_len_slot, h.varbit_len_slot)
             for h in with_locals.layout.headers.values() if h.type.varbit]
    kept += [(slots.layout.hidden[n], with_locals.layout.hidden[n]) for n in with_locals.layout.hidden]
    kept += [(getattr(slots.layout, kind)[n].next_slot, getattr(with_locals.layout, kind)[n].next_slot)
             for kind in ("stacks", "union_stacks") for n in getattr(with_locals.layout, kind)]
    assert sorted(s1 for _, s1 in kept) == list(range(with_locals.layout.size))     # every slot compared
    assert len(kept) + len(local_slots) == slots.layout.size
    rng = random.Random(path.stem)
    for i in range(200):
        F2 = random_state(slots, rng)
        for s in local_slots:
            F2[s] = 0
        F1 = with_locals.new_packet_state()
        for s2, s1 in kept:
            F1[s1] = F2[s2]
        for a, b in ((with_locals.ingress, slots.ingress), (with_locals.egress, slots.egress)):
            assert _run(a, F1, i) == _run(b, F2, i)
            assert [F1[s1] for _, s1 in kept] == [F2[s2] for s2, _ in kept]
