"""`aifabric workload show`, in process: the op counts and bytes of a small job file as worked
out by hand, the JSON beside the table, placement on a rail fabric, bad input in one line."""
from __future__ import annotations

import json

import pytest

from aifabric.cli import main

JOB = """\
model: {name: small, layers: 4, hidden: 64, ffn: 256, heads: 4, seq_len: 16, vocab: 100}
parallelism: {dp: 2, micro_batch: 2, micro_batches: 3, bucket_mb: 100}
sustained_tflops: 1
"""


def test_counts_bytes_and_step_of_a_job_file(tmp_path, capsys):
    (tmp_path / "job.yaml").write_text(JOB)
    out, ops = tmp_path / "w.json", tmp_path / "ops.json"
    assert main(["workload", "show", "--file", str(tmp_path / "job.yaml"), "--scale", "10", "--json", str(out),
                 "--ops", str(ops)]) == 0
    text = capsys.readouterr().out
    data = json.loads(out.read_text())
    ranks = json.loads(ops.read_text())["ranks"]
    assert [len(r) for r in ranks] == [3 * 18 + 1] * 2 and ranks[1][-1]["kind"] == "all_reduce"
    # per micro-batch: 4 layers x (attention, mlp) forward and backward, logits forward and backward
    assert data["op_counts"] == [{"compute": 3 * 18, "all_reduce": 1}] * 2
    grads = (4 * (12 * 64 * 64 + 2 * 64) + 64 + 100 * 64) * 2   # parameters (the final norm's h too) x bf16: 407168 bytes
    assert data["kinds"]["all_reduce"] == {"ops": 2, "bytes_max_rank": grads, "emulated_bytes_max_rank": -(-grads // 10),
                                           "bytes_all_ranks": 2 * grads}
    real = data["estimate"]["real"]
    assert real["step_s"] == pytest.approx(real["ranks"][0]["compute_s"] + real["ranks"][0]["exposed_comm_s"])
    assert data["estimate"]["emulated"]["step_s"] == pytest.approx(real["step_s"] * data["scale"]["time_dilation"],
                                                                   rel=1e-6)
    assert "analytic link-bound step" in text and "scaling cannot preserve" in text and "latency" in text


def test_json_on_standard_output_only(capsys):
    assert main(["workload", "show", "--preset", "tiny", "--dp", "2", "--pp", "2", "--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["scale"]["factor"] > 1 and data["estimate"]["emulated"]["step_s"] == pytest.approx(10.0, rel=0.01)


def test_placed_on_a_rail_fabric_tp_inside_servers(capsys):
    assert main(["workload", "show", "--preset", "tiny", "--dp", "2", "--tp", "2", "--place", "--topo", "rail",
                 "--servers", "2", "--gpus", "2", "--json", "-"]) == 0
    placement = json.loads(capsys.readouterr().out)["placement"]
    assert placement["hosts"] == ["s0g0", "s0g1", "s1g0", "s1g1"]


@pytest.mark.parametrize("argv,message", [
    (["--preset", "tiny", "--pp", "3"], "parallelism.pp=3 must divide model.layers=8"),
    (["--preset", "tiny", "--dp", "32", "--place"], "DP*TP*PP = 32 ranks, but fat_tree(k=4) holds 16"),
    (["--file", "/nonexistent/job.yaml"], "/nonexistent/job.yaml: No such file"),
    (["--file", "job.yaml", "--tp", "2"], "--tp: job.yaml holds the parallelism"),
])
def test_bad_input_is_one_line_naming_it(capsys, argv, message):
    assert main(["workload", "show", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
