"""A job from a small YAML or JSON file (JSON is YAML, so one reader takes both)::

    model:                    # a preset's name, or the fields of ModelShape
      name: small
      layers: 4
      hidden: 256
      ffn: 1024
      heads: 4
      seq_len: 128
      vocab: 1000
    parallelism: {dp: 2, tp: 2, pp: 2, micro_batches: 4, bucket_mb: 1, zero_stage: 1}
    sustained_tflops: 150

Every error names the field (``model.hidden: ...``, ``parallelism.dpp: unknown field``).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from aifabric.workloads.errors import WorkloadError
from aifabric.workloads.job import DEFAULT_TFLOPS, Job
from aifabric.workloads.parallelism import Parallelism
from aifabric.workloads.presets import preset
from aifabric.workloads.shape import ModelShape

SECTIONS = ("model", "parallelism", "sustained_tflops")


def load_job(path: str | Path) -> Job:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise WorkloadError(f"{path}: not YAML or JSON: {e}") from None
    except OSError as e:
        raise WorkloadError(f"{path}: {e.strerror}") from None
    return job_from_dict(data)


def job_from_dict(data: Any) -> Job:
    if not isinstance(data, dict):
        raise WorkloadError(f"a job file holds a mapping with {', '.join(SECTIONS)}; got {type(data).__name__}")
    _no_unknown("", data, SECTIONS)
    if "model" not in data:
        raise WorkloadError("model: missing (a preset's name or the model's fields)")
    model = data["model"]
    shape = preset(model) if isinstance(model, str) else _build(ModelShape, "model", model)
    parallelism = _build(Parallelism, "parallelism", data.get("parallelism", {}))
    return Job(shape, parallelism, data.get("sustained_tflops", DEFAULT_TFLOPS))


def _build(cls: type, section: str, values: Any) -> Any:
    if not isinstance(values, dict):
        raise WorkloadError(f"{section}: must be a mapping of fields, got {values!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    _no_unknown(f"{section}.", values, fields)
    missing = [n for n, f in fields.items()
               if f.default is dataclasses.MISSING and n not in values]
    if missing:
        raise WorkloadError(f"{section}.{missing[0]}: missing")
    for name, value in values.items():
        expected = fields[name].type
        if expected in ("bool",) and not isinstance(value, bool):
            raise WorkloadError(f"{section}.{name}: must be true or false, got {value!r}")
        if expected in ("str",) and not isinstance(value, str):
            raise WorkloadError(f"{section}.{name}: must be a string, got {value!r}")
    return cls(**values)


def _no_unknown(prefix: str, values: dict, known: Any) -> None:
    for key in values:
        if key not in known:
            raise WorkloadError(f"{prefix}{key}: unknown field; known: {', '.join(known)}")
