"""The end-of-test comparison of what came out with what the STF file expected.

As p4c's BMv2 runner: the frames on each port, in the order they left, against the
port's ``expect`` lines in file order; every port a test sends on or expects on is
watched, and a frame on a watched port that no ``expect`` accounts for is a failure (so
is an expected frame that never came). A pattern matches a frame that starts with it,
``*`` nibbles matching anything; a pattern ending in ``$`` matches only a frame of exactly
its length. ``expect PORT`` with no data lets the port carry anything.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Expected:
    pattern: str | None       # upper-case hex with '*' nibbles; None: no data given
    exact: bool               # '$': the frame's length must be the pattern's
    line: int


@dataclass(frozen=True)
class Difference:
    """The first disagreement on one port."""
    port: int
    index: int                # which frame of the port (0 = its first)
    expected: str | None      # the pattern (None: no frame was expected here)
    actual: str | None        # the frame's hex (None: no frame came)
    reason: str
    line: int | None = None   # the expect line

    def __str__(self) -> str:
        where = f" (line {self.line})" if self.line else ""
        return (f"port {self.port}, frame {self.index}{where}: {self.reason}\n"
                f"  expected {self.expected or '-'}\n  actual   {self.actual or '-'}")


def matches(pattern: str, exact: bool, frame: bytes) -> str | None:
    """None when ``frame`` matches, else why not."""
    got = frame.hex().upper()
    if exact and len(got) > len(pattern):
        return f"frame longer than expected ({len(frame)} bytes, expected {len(pattern) // 2})"
    if len(got) < len(pattern):
        return f"frame shorter than expected ({len(frame)} bytes, expected at least {len(pattern) // 2})"
    for i, (want, have) in enumerate(zip(pattern, got)):
        if want != "*" and want != have:
            return f"differs at byte {i // 2} (nibble {i})"
    return None


def compare(expected: dict[int, list[Expected]], outputs: dict[int, list[bytes]],
            watched: set[int]) -> list[Difference]:
    """Every port's first difference, ports in ascending order."""
    out = []
    for port in sorted(watched):
        wants, got = expected.get(port, []), outputs.get(port, [])
        if any(w.pattern is None for w in wants):
            continue            # 'expect PORT' alone: anything goes
        for i in range(max(len(wants), len(got))):
            w = wants[i] if i < len(wants) else None
            g = got[i] if i < len(got) else None
            if w is None:
                out.append(Difference(port, i, None, g.hex().upper(), f"unexpected frame ({len(got)} came, "
                                                                     f"{len(wants)} expected)"))
                break
            if g is None:
                out.append(Difference(port, i, w.pattern + ("$" if w.exact else ""), None,
                                      f"expected frame missing ({len(got)} came, {len(wants)} expected)", w.line))
                break
            why = matches(w.pattern, w.exact, g)
            if why:
                out.append(Difference(port, i, w.pattern + ("$" if w.exact else ""), g.hex().upper(), why, w.line))
                break
    return out
