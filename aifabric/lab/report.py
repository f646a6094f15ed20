"""Plain-text tables and JSON output for the demos and benchmarks.

A figure whose measurement failed is a `Failed` (why it failed), never a number: tables show it
as ``failed (why)``, JSON records it as ``{"failed": "why"}``, and `say_failed` names every one
in a report (`failed_figures` lists them) so the command can say so and exit non-zero.
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence, TypeVar, Union

T = TypeVar("T")


@dataclass(frozen=True)
class Failed:
    """A measurement that failed, and why (the tool's own words where it gave any)."""

    why: str

    def __str__(self) -> str:
        return f"failed ({self.why})"

    def __round__(self, ndigits: int | None = None) -> "Failed":
        return self             # a failed figure rounded is still failed (arithmetic on it raises)


Measured = Union[T, Failed]       # a figure, or why it could not be measured


def failed_figures(data: Any) -> list[str]:
    """Every `Failed` in a report (nested dicts, lists, tuples), as ``"path: why"``."""
    return [f"{path}: {why}" for path, why in _failed(data, "")]


def say_failed(data: Any) -> bool:
    """Print the failed measurements of a report, if any (those failed for one reason on one
    line); True when there were some."""
    by_why: dict[str, list[str]] = {}
    for path, why in _failed(data, ""):
        by_why.setdefault(why, []).append(path)
    if by_why:
        lines = [f"  {', '.join(paths)}: {why}" for why, paths in by_why.items()]
        print("\nmeasurements that failed:\n" + "\n".join(lines))
    return bool(by_why)


def _failed(data: Any, where: str) -> list[tuple[str, str]]:
    if isinstance(data, Failed):
        return [(where or "figure", data.why)]
    if isinstance(data, dict):
        items = ((f"{where}.{k}" if where else str(k), v) for k, v in data.items())
    elif isinstance(data, (list, tuple)):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(data))
    else:
        return []
    return [found for path, v in items for found in _failed(v, path)]


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None) -> str:
    """An aligned text table; numbers right-aligned, text left-aligned. A `Failed` cell reads
    ``failed (why)``, or ``failed [n]`` with ``[n] why`` under the table where several cells
    failed for one reason."""
    reasons = Counter(c.why for row in rows for c in row if isinstance(c, Failed))
    notes = [why for why, n in reasons.items() if n > 1]

    def fmt(c: Any) -> str:
        return f"failed [{notes.index(c.why) + 1}]" if isinstance(c, Failed) and c.why in notes else _fmt(c)

    cells = [[fmt(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    numeric = [all(_is_number(row[i]) or isinstance(row[i], Failed) for row in rows) if rows else False
               for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [title] if title else []
    out += [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    out += [f"[{n}] {why}" for n, why in enumerate(notes, 1)]
    return "\n".join(out)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"
    return str(v)


def write_json(path: str | Path, data: dict) -> None:
    """``data`` as JSON, a `Failed` figure as ``{"failed": why}``, an object with ``to_dict`` as what it gives."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(data, indent=2, sort_keys=True, default=_json_default) + "\n")


def say_written(picture: str | Path, json_path: str | Path | None, figures: dict) -> None:
    """A demo's end: where its picture went, and its figures written as JSON where asked."""
    print(f"\npicture written to {Path(picture).resolve()}")
    if json_path:
        write_json(json_path, figures)
        print(f"figures written to {Path(json_path).resolve()}")


def _json_default(v: Any) -> Any:
    if isinstance(v, Failed):
        return {"failed": v.why}
    if hasattr(v, "to_dict"):        # a figure's own record (a link rate, a plan)
        return v.to_dict()
    raise TypeError(f"{type(v).__name__} is not JSON serialisable: {v!r}")


def progress(message: str) -> None:
    """One line of progress on standard error (stdout keeps the results)."""
    print(f"... {message}", file=sys.stderr, flush=True)


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend (no display here)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save_figure(fig, path: str | Path) -> Path:
    """Lay out, write (PNG, parents made) and close a figure; returns the path."""
    fig.tight_layout()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=110)
    pyplot().close(fig)
    return p
