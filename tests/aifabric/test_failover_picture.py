"""The failover benchmark's picture (benchmarks/failover.py's `draw`) on made-up runs, no
fabric: its titles give milliseconds whole, and a panel with no probe in its window says why
instead of showing an empty axis."""
from __future__ import annotations

from aifabric.experiments.failover_bench import FailoverPlan, FailoverRun
from aifabric.lab.failures import FailureEvent
from benchmarks.failover import draw, figure

FAIL = FailureEvent("fail_link", "p0a0-c0", start=100.0, end=100.001, wall=0.0)
RESTORE = FailureEvent("restore_link", "p0a0-c0", start=103.0, end=103.001, wall=3.0)


def _run(scenario: str, **kw) -> FailoverRun:
    return FailoverRun(scenario, 1, element="p0a0-c0", fail=FAIL, restore=RESTORE, **kw)


def _runs() -> list[FailoverRun]:
    probes = [(t - 200.0, i) for i, t in enumerate(range(0, 700))]          # -200 .. 499 ms, one a ms
    recovered = [(t, s) for t, s in probes if not 0 <= t < 292]
    return [
        _run("heartbeat", outage_ms=292.916514, probes_lost=292, detected_ms=40.2, written_ms=41.7,
             reroute_ms=180.5, recovered_by="fabric", arrivals=recovered),
        _run("oracle", outage_ms=578.5511700004882, probes_lost=578, reroute_ms=578.2, recovered_by="fabric",
             arrivals=[(t, s) for t, s in probes if t < 0]),
        _run("agg-kill", recovered_by="never", probes_lost=3000, arrivals=[(-900.4, 1), (3600.0, 4500)]),
        _run("dataplane", arrivals=[], errors=["the probe sender or receiver wrote nothing"]),
        _run("none", outage_ms=0.0, recovered_by="no loss", arrivals=[]),
    ]


def test_titles_give_whole_milliseconds_and_empty_panels_say_why(tmp_path) -> None:
    fig = figure(_runs(), FailoverPlan())
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == [
        "heartbeat: p0a0-c0 - outage 293 ms, 292 probes lost",
        "oracle: p0a0-c0 - outage 579 ms, 578 probes lost",
        "agg-kill: p0a0-c0 - no probe got through again before the run ended, 3000 probes lost",
        "dataplane: p0a0-c0 - outage not measured, 0 probes lost",
        "none: p0a0-c0 - outage 0 ms, 0 probes lost",
    ]
    texts = [[t.get_text() for t in ax.texts] for ax in fig.axes]
    assert texts[:2] == [[], []]                 # probes drawn: no text over them
    assert texts[2] == ["no probe arrived from -150 to 300 ms; the last one before at -900 ms, the next at 3600 ms"]
    assert texts[3] == ["no probe measured: the probe sender or receiver wrote nothing"]
    assert texts[4] == ["no probe arrived in this run"]
    for ax, said in zip(fig.axes, texts):
        assert said or ax.lines[0].get_label() == "probe arrived"
        assert not said or all(line.get_label() != "probe arrived" for line in ax.lines)
        assert ax.get_xlim()[0] <= -150
    # the marks' labels are whole milliseconds too
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["probe arrived", "failure (0 ms)", "controller found the port dead (40 ms)",
                      "port_status written (42 ms)", "reroute done (180 ms)"]

    draw(tmp_path / "failover.png", _runs(), FailoverPlan())
    assert (tmp_path / "failover.png").stat().st_size > 10_000
