"""Run-time helpers the generated pipeline code calls (bound into its namespace)."""
from __future__ import annotations

import logging
import random

log = logging.getLogger("softswitch.p4")


class Exit(Exception):
    """The P4 ``exit`` statement: leave the current control."""


class Abort(Exception):
    """A failed assert/assume: BMv2 aborts the switch; softswitch drops the packet."""


class ParserFault(Exception):
    """A parser error: carries the error code that goes into ``parser_error``."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code
        self.offset = 0          # bytes consumed when it happened (set by the parse state)


ZEROS = [0] * 4096


def zeros_source(k: int) -> str:
    """Source of a list of k zeros (a header's fields made valid): a slice of ZEROS where it
    is long enough; it must be exactly k long (unchecked_slots.py)."""
    return f"_ZEROS[:{k}]" if k <= len(ZEROS) else f"[0] * {k}"


def copy_slots(F: list, dst: int, src: int, n: int) -> None:
    """``F[dst:dst + n] = F[src:src + n]``, refused (IndexError) unless both runs lie inside
    ``F``: a slice assignment never changes the packet state's length (the compiled path reads
    its constant slots unchecked: unchecked_slots.py)."""
    if not (0 <= src and 0 <= dst and src + n <= len(F) and dst + n <= len(F)):
        raise IndexError(f"slots {src}..{src + n} to {dst}..{dst + n} outside the packet state ({len(F)} slots)")
    F[dst:dst + n] = F[src:src + n]


def assign_header(F: list, dst: int, src: int, slots: int) -> None:
    """BMv2 assign_header: an invalid source invalidates the destination."""
    if not F[src]:
        F[dst] = 0
        return
    copy_slots(F, dst, src, slots)


def stack_push(F: list, elems: tuple, sizes: tuple, next_slot: int, num: int) -> None:
    """P4_16 push_front(num): shift up by num, the first num elements become invalid."""
    if num <= 0:
        return
    size = len(elems)
    F[next_slot] = min(size, F[next_slot] + num)
    for i in range(size - 1, num - 1, -1):
        for dst, src, n in zip(elems[i], elems[i - num], sizes):
            copy_slots(F, dst, src, n)
    for i in range(min(size, num)):
        for b in elems[i]:
            F[b] = 0


def stack_pop(F: list, elems: tuple, sizes: tuple, next_slot: int, num: int) -> None:
    """P4_16 pop_front(num): shift down by num, the last num elements become invalid."""
    if num <= 0:
        return
    size = len(elems)
    F[next_slot] -= min(F[next_slot], num)
    for i in range(0, max(0, size - num)):
        for dst, src, n in zip(elems[i], elems[i + num], sizes):
            copy_slots(F, dst, src, n)
    for i in range(max(0, size - num), size):
        for b in elems[i]:
            F[b] = 0


def log_msg(fmt: str, values: tuple) -> None:
    """P4 log_msg: each ``{}`` takes the next value."""
    out, i, k = [], 0, 0
    while i < len(fmt):
        if fmt.startswith("{}", i) and (i == 0 or fmt[i - 1] != "\\"):
            out.append(str(values[k]) if k < len(values) else "{}")
            k += 1
            i += 2
        else:
            out.append(fmt[i])
            i += 1
    log.info("%s", "".join(out).replace("\\{", "{").replace("\\}", "}"))


def run_nodes(F: list, node) -> None:
    """Run a control node by node from ``node``: each node function returns the next."""
    while node is not None:
        node = node(F)


BASE_NAMESPACE = {
    "_Exit": Exit,
    "_Abort": Abort,
    "_PErr": ParserFault,
    "_ZEROS": ZEROS,
    "_assign_header": assign_header,
    "_stack_push": stack_push,
    "_stack_pop": stack_pop,
    "_log_msg": log_msg,
    "_randint": random.randint,
    "_run_nodes": run_nodes,
}
