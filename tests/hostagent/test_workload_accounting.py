"""hostagent.workload_runner.accounting: a step split into compute, exposed communication (not
covered by compute) and idle, from op intervals worked out by hand."""
from hostagent.workload_runner.accounting import split


def _op(kind, start, end):
    return {"kind": kind, "start": start, "end": end}


def test_overlapped_communication_is_not_exposed():
    ops = [_op("compute", 0, 4), _op("all_reduce", 1, 3), _op("compute", 4, 6), _op("all_reduce", 5, 8),
           _op("send", 8, 9)]
    s = split(ops, 0, 10)
    assert s["compute_s"] == 6
    assert s["exposed_comm_s"] == 3           # 6..8 of the second all_reduce, the send
    assert s["idle_s"] == 1                   # 9..10
    assert s["comm_by_kind_s"] == {"all_reduce": 5, "send": 1}


def test_overlapping_communications_count_once():
    s = split([_op("all_reduce", 0, 2), _op("all_gather", 1, 3), _op("recv", 2.5, 4)], 0, 4)
    assert s["exposed_comm_s"] == 4 and s["idle_s"] == 0 and s["compute_s"] == 0
