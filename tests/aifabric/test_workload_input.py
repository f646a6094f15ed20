"""Bad models, parallelism and job files: each refused with the field named."""
from __future__ import annotations

import json

import pytest

from aifabric.workloads import Job, ModelShape, Parallelism, WorkloadError, load_job, preset

MODEL = {"name": "small", "layers": 4, "hidden": 64, "ffn": 256, "heads": 4, "seq_len": 16, "vocab": 100}


def write(tmp_path, data, suffix=".json"):
    path = tmp_path / f"job{suffix}"
    path.write_text(json.dumps(data) if suffix == ".json" else data)
    return path


def test_a_yaml_file_and_a_json_file_make_the_same_job(tmp_path):
    yaml_text = ("model:\n" + "".join(f"  {k}: {v}\n" for k, v in MODEL.items())
                 + "parallelism: {dp: 2, tp: 2, pp: 2, micro_batches: 4, zero_stage: 1}\nsustained_tflops: 90\n")
    from_yaml = load_job(write(tmp_path, yaml_text, ".yaml"))
    from_json = load_job(write(tmp_path, {"model": MODEL, "parallelism": {"dp": 2, "tp": 2, "pp": 2,
                                          "micro_batches": 4, "zero_stage": 1}, "sustained_tflops": 90}))
    assert from_yaml == from_json
    assert from_json.shape.hidden == 64 and from_json.parallelism.zero_stage == 1
    assert from_json.sustained_tflops == 90


def test_a_preset_by_name(tmp_path):
    job = load_job(write(tmp_path, {"model": "llama2-7b", "parallelism": {"dp": 8}}))
    assert job.shape == preset("llama2-7b")


@pytest.mark.parametrize("data,field", [
    ({"model": {**MODEL, "hidden": "abc"}}, r"model\.hidden: must be an integer >= 1, got 'abc'"),
    ({"model": {**MODEL, "layers": 0}}, r"model\.layers: must be an integer >= 1"),
    ({"model": {k: v for k, v in MODEL.items() if k != "vocab"}}, r"model\.vocab: missing"),
    ({"model": {**MODEL, "hiden": 3}}, r"model\.hiden: unknown field"),
    ({"model": {**MODEL, "dtype": "int4"}}, r"model\.dtype: 'int4' is not one of"),
    ({"model": {**MODEL, "gated_mlp": "yes"}}, r"model\.gated_mlp: must be true or false"),
    ({"model": {**MODEL, "heads": 5}}, r"model\.heads=5 must divide model\.hidden=64"),
    ({"model": {**MODEL, "top_k": 2}}, r"model\.top_k=2 needs model\.experts > 0"),
    ({"model": MODEL, "parallelism": {"dpp": 2}}, r"parallelism\.dpp: unknown field"),
    ({"model": MODEL, "parallelism": {"pp": 3}}, r"parallelism\.pp=3 must divide model\.layers=4"),
    ({"model": MODEL, "parallelism": {"tp": 8}}, r"parallelism\.tp=8 must divide model\.heads=4"),
    ({"model": MODEL, "parallelism": {"dp": 2, "ep": 2}}, r"parallelism\.ep=2 needs model\.experts > 0"),
    ({"model": MODEL, "parallelism": {"dp": 3, "ep": 2}}, r"parallelism\.ep=2 must divide parallelism\.dp=3"),
    ({"model": MODEL, "parallelism": {"zero_stage": 4}}, r"parallelism\.zero_stage: must be 0, 1, 2 or 3"),
    ({"model": MODEL, "parallelism": {"schedule": "zb"}}, r"parallelism\.schedule: 'zb' is not one of"),
    ({"model": MODEL, "parallelism": {"bucket_mb": 0}}, r"parallelism\.bucket_mb: must be a number > 0"),
    ({"model": MODEL, "sustained_tflops": -1}, r"sustained_tflops: must be a number > 0"),
    ({"model": MODEL, "extra": 1}, r"^extra: unknown field"),
    ({"model": "gpt5"}, r"preset: unknown model 'gpt5'"),
    ({"parallelism": {}}, r"model: missing"),
    ([1, 2], r"a job file holds a mapping"),
])
def test_bad_input_names_the_field(tmp_path, data, field):
    with pytest.raises(WorkloadError, match=field):
        load_job(write(tmp_path, data))


def test_an_unreadable_or_malformed_file_is_named(tmp_path):
    with pytest.raises(WorkloadError, match="nope.yaml: No such file"):
        load_job(tmp_path / "nope.yaml")
    with pytest.raises(WorkloadError, match="job.yaml: not YAML or JSON"):
        load_job(write(tmp_path, "model: [unclosed\n", ".yaml"))


def test_moe_experts_must_split_over_ep():
    moe = ModelShape(name="m", layers=2, hidden=64, ffn=128, heads=4, seq_len=16, vocab=100, experts=6, top_k=2)
    with pytest.raises(WorkloadError, match=r"parallelism\.ep=4 must divide model\.experts=6"):
        Job(moe, Parallelism(dp=4, ep=4))
