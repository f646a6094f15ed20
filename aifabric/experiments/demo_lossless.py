"""``aifabric demo lossless``: priority flow control and the pathologies AI fabrics fight, on a k=4
fat-tree of softswitches whose links are limited in bits, each scene with PFC off and on and the
same flows (aifabric.experiments.lossless_scenes says what each scene does): incast 8 to 1, a
victim of head-of-line blocking, DCQCN with its ECN threshold below and above XOFF, a pause storm
and a deadlock, the last two with and without the PFC watchdog. Prints a table per scene, checks
the goals, writes the figures as JSON and a picture of pauses over time; says how busy the machine
was. BMv2 has no PFC: with it the command says so and stops.
"""
from __future__ import annotations

import time
from pathlib import Path

from aifabric.experiments.lossless_scenes import (ECN_ABOVE, ECN_BELOW, FRAME, PFC, RATE, WATCHDOG, Run, Scenes,
                                                  as_json, demo_config)
from aifabric.lab import report
from aifabric.lab.cpu_meter import CpuMeter
from aifabric.lab.lab import Lab
from aifabric.lab.links import LinkPlan, LinkRate, limit_links
from controller.fabric_controller import Pipeline
from controller.lossless.target import BMV2_PFC
from emulation.p4switch import resolve_target
from topologies.fabric import fat_tree

DEFAULT_PNG = "out/lossless_demo.png"
QUEUE_DEPTH = 256                        # the lossy classes' queues, packets
SCENES = ("incast", "victim", "dcqcn", "storm", "deadlock")


def run(k: int = 4, target: str = "softswitch", json_path: str | None = None, png_path: str | None = None,
        pipeline: Pipeline | None = None, rate: LinkRate = RATE, scenes: tuple[str, ...] = SCENES) -> int:
    say = report.progress
    if resolve_target(target)[0] != "softswitch":
        print(f"aifabric demo lossless: {BMV2_PFC}. Run it with --target softswitch.")
        return 2
    t_start = time.monotonic()
    figures: dict = {"topology": f"fat-tree k={k}", "rate": rate.to_dict(), "frame_bytes": FRAME,
                     "pfc": {"xoff": PFC.xoff, "xon": PFC.xon, "headroom": PFC.headroom, "quanta": PFC.quanta},
                     "watchdog": vars(WATCHDOG), "runs": []}
    runs: list[Run] = []
    with Lab(fat_tree(k), target=target, pipeline=pipeline, progress=say, lossless=demo_config()) as lab:
        limit_links(lab, LinkPlan(rate, queue_depth=QUEUE_DEPTH, frame_bytes=FRAME))
        say(f"links at {rate.describe()}, class 3 lossless when PFC is on: XOFF {PFC.xoff} B, XON {PFC.xon} B, "
            f"headroom {PFC.headroom} B ({PFC.xoff // FRAME}, {PFC.xon // FRAME}, {PFC.headroom // FRAME} frames)")
        s = Scenes(lab, rate, say)
        cpu = CpuMeter(lab.target_pids)
        t_scenes = time.monotonic()
        for scene in scenes:
            runs += play(s, scene)
        share = cpu.read()
        figures["scenes_s"] = round(time.monotonic() - t_scenes, 1)
        figures["cpu"] = {"busy": round(share.busy, 3), "switches": round(share.switches, 3)}
    figures["wall_s"] = round(time.monotonic() - t_start, 1)
    figures["runs"] = [as_json(r) for r in runs]
    goals = check_goals(runs)
    figures["goals"] = goals
    print_tables(runs, figures)
    png = Path(png_path or DEFAULT_PNG)
    draw(png, runs)
    report.say_written(png, json_path, figures)
    failed = [g for g, v in goals.items() if v["met"] is False]
    if failed:
        print("\ngoals not met: " + ", ".join(failed))
    return 1 if failed else 0


def play(s: Scenes, scene: str) -> list[Run]:
    if scene == "incast":
        return [s.incast(False), s.incast(True)]
    if scene == "victim":
        return [s.incast(False, victim=True), s.incast(True, victim=True)]
    if scene == "dcqcn":
        return [s.dcqcn(False, ECN_BELOW), s.dcqcn(True, ECN_BELOW), s.dcqcn(True, ECN_ABOVE)]
    if scene == "storm":
        return [s.storm(False, False), s.storm(True, False), s.storm(True, True)]
    if scene == "deadlock":
        return [s.deadlock(False, False), s.deadlock(True, False), s.deadlock(True, True)]
    raise ValueError(f"scene {scene!r}: one of {', '.join(SCENES)}")


def _find(runs: list[Run], scene: str, variant_start: str) -> Run | None:
    return next((r for r in runs if r.scene == scene and r.variant.startswith(variant_start)), None)


def check_goals(runs: list[Run]) -> dict:
    """The issue's goals, each with its figures and whether it was met (None: not run)."""
    goals: dict = {}
    on = _find(runs, "incast", "PFC on")
    if on is not None:
        drops = on.totals["lossless_drops"] + on.totals["drops"] + on.figures["lost"]
        goals["incast 8:1 with PFC: no drop in the lossless class, bottleneck >= 0.95"] = {
            "drops": drops, "bottleneck_util": on.figures["bottleneck_util"],
            "met": drops == 0 and (on.figures["bottleneck_util"] or 0) >= 0.95}
    below, above = _find(runs, "dcqcn", "PFC on, ECN at 4"), _find(runs, "dcqcn", "PFC on, ECN at 100")
    if below is not None and above is not None:
        goals["DCQCN below XOFF cuts pause time at least in half"] = {
            "pausing_s_below": below.totals["pausing_s"], "pausing_s_above": above.totals["pausing_s"],
            "met": below.totals["pausing_s"] <= 0.5 * above.totals["pausing_s"]}
    limit = WATCHDOG.detect_ms + WATCHDOG.poll_ms
    for scene in ("storm", "deadlock"):
        r = _find(runs, scene, "PFC on, watchdog")
        if r is not None:
            after = r.figures.get("detected_after_ms")
            goals[f"{scene} contained by the watchdog within {WATCHDOG.detect_ms} + {WATCHDOG.poll_ms} ms"] = {
                "detected_after_ms": after, "met": after is not None and after <= limit}
    return goals


def print_tables(runs: list[Run], figures: dict) -> None:
    def rows(scene: str, extra: list[tuple[str, str]]) -> None:
        sel = [r for r in runs if r.scene == scene]
        if not sel:
            return
        base = [("PAUSE frames sent", "pause_sent"), ("time neighbours held paused (s)", "pausing_s"),
                ("lossless drops", "lossless_drops"), ("queue drops (class 3)", "drops"),
                ("watchdog drops", "watchdog_drops"), ("storms caught", "storms")]
        table = [(label, *(r.totals.get(k) for r in sel)) for label, k in base]
        table += [(label, *(r.figures.get(k) for r in sel)) for label, k in extra]
        table.append(("run (s)", *(r.seconds for r in sel)))
        print(report.table(["", *(r.variant for r in sel)], table, title=f"\n{scene}"))

    rows("incast", [("flows' datagrams lost", "lost"), ("bottleneck (of its rate)", "bottleneck_util")])
    rows("victim", [("victim throughput (bit/s)", "victim_bps"), ("victim offered (bit/s)", "victim_offered_bps"),
                    ("its host's class paused (s)", "host_paused_s"), ("victim's life (s)", "victim_life_s"),
                    ("theory: offered x unpaused (bit/s)", "theory_bps"), ("fair share C/8 (bit/s)", "fair_share_bps"),
                    ("incast datagrams lost", "lost")])
    rows("dcqcn", [("flows' datagrams lost", "lost"), ("CNPs sent", "cnps"), ("bottleneck (of its rate)", "bottleneck_util")])
    rows("storm", [("neighbour's flows delivered", "neighbour_delivered"), ("stormed host's delivered", "stormed_delivered"),
                   ("ports pausing at the peak", "directions_pausing_peak"), ("storm caught after (ms)", "detected_after_ms"),
                   ("limit: detect + poll (ms)", "limit_ms")])
    rows("deadlock", [("stuck (queued, nothing moved for 1 s)", "stuck"), ("packets queued in the loop", "loop_queued"),
                      ("loop packets sent in that second", "loop_moved_in_1s"), ("loop ports pausing", "loop_pausing"),
                      ("broken after the watchdog came on (ms)", "broken_after_watchdog_on_ms"),
                      ("caught after the pause began (ms)", "detected_after_ms"), ("limit (ms)", "limit_ms")])
    print(report.table(["goal", "figures", "met"], [(g, ", ".join(f"{k} {v}" for k, v in d.items() if k != "met"),
                                                     d["met"]) for g, d in figures["goals"].items()], title="\nGoals"))
    cpu = figures.get("cpu", {})
    print(f"\nscenes took {figures.get('scenes_s')} s ({figures['wall_s']} s with bring-up); the machine "
          f"{100 * cpu.get('busy', 0):.0f}% busy meanwhile, the switches {100 * cpu.get('switches', 0):.0f}% of it")


def draw(path: Path, runs: list[Run]) -> None:
    """Per scene: the ports holding a neighbour paused over time, each run a line (the PAUSE frames
    sent so far on the right axis, dashed); three scenes a row, each panel's runs named below it."""
    plt = report.pyplot()
    scenes = list(dict.fromkeys(r.scene for r in runs)) or ["(no scene)"]
    cols = min(3, len(scenes))
    rows = -(-len(scenes) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.8 * cols, 4.2 * rows), squeeze=False)
    for ax in axes.flat[len(scenes):]:
        ax.set_visible(False)
    for ax, scene in zip(axes.flat, scenes):
        right = ax.twinx()
        for i, r in enumerate(x for x in runs if x.scene == scene):
            colour = f"C{i}"
            if r.timeline:
                t, pausing, frames = zip(*r.timeline)
                ax.step(t, pausing, where="post", color=colour, label=r.variant)
                right.plot(t, frames, color=colour, linestyle="--", alpha=0.6)
        ax.set_title(scene)
        ax.set_xlabel("s into the run")
        ax.set_ylabel("ports holding a neighbour paused")
        right.set_ylabel("PAUSE frames sent (dashed)")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1, frameon=False)
    fig.suptitle("Pauses over time, class 3, k=4 fat-tree")
    fig.tight_layout()
    report.save_figure(fig, path)
