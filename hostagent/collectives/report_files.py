"""AllReduce reports as files: how a rank's result reaches whoever watches the fabric.

`python -m hostagent.collectives worker|ring --report-dir DIR` writes its report (the JSON line
it prints) to ``DIR/<algorithm>-job<job>-rank<rank>.json`` as well: written to a temporary name
and renamed, so a reader never sees half a report, and replaced by the rank's next run. The
controller's exporter reads the directory at scrape time (`hostagent.collectives.report_metrics`);
in the Docker stack it is the run directory the fabric container shares with the controller's.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

RUN_SUBDIR = "allreduce"      # the reports' directory in a fabric's run directory
FIELDS = ("algorithm", "job", "rank", "workers", "tensor_bytes", "time_s", "ok", "retransmissions")


def report_path(directory: Path, report: dict) -> Path:
    return directory / f"{report['algorithm']}-job{int(report['job'])}-rank{int(report['rank'])}.json"


def write_report(directory: str | Path, report: dict) -> Path:
    """``report`` into ``directory`` (made when missing); returns the file written."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = report_path(directory, report)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(report))
    partial.replace(path)
    return path


@dataclass(frozen=True)
class RankReport:
    algorithm: str
    job: int
    rank: int
    workers: int
    tensor_bytes: int
    time_s: float
    ok: bool
    retransmissions: int


class BadReport(ValueError):
    """A report file that cannot be used; the message says why (a short reason first)."""


def read_report(path: Path) -> RankReport:
    """One report file; BadReport when it is not JSON or lacks a field."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise BadReport(f"unreadable: {err}") from None
    if not isinstance(data, dict):
        raise BadReport("invalid: not a JSON object")
    missing = [f for f in FIELDS if f not in data]
    if missing:
        raise BadReport(f"invalid: no {', '.join(missing)}")
    try:
        return RankReport(str(data["algorithm"]), int(data["job"]), int(data["rank"]), int(data["workers"]),
                          int(data["tensor_bytes"]), float(data["time_s"]), bool(data["ok"]),
                          int(data["retransmissions"]))
    except (TypeError, ValueError) as err:
        raise BadReport(f"invalid: {err}") from None
