"""The host agent's configuration as a command line and back, its `params` command, the stats
files and their Prometheus collector, and the sender's rate-control messages (no root needed)."""
from __future__ import annotations

import json
import os
import socket
from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from hostagent.agent.cli import build_parser, main
from hostagent.agent.config import AgentConfig, from_args, parse_rate
from hostagent.agent.dcqcn import DcqcnParams
from hostagent.agent.flowkey import FlowKey
from hostagent.agent.metrics import AgentCollector
from hostagent.agent.load_balance_plb import PlbParams
from hostagent.agent.stats import AgentStats, SentFlowStats, Totals
from hostagent.traffic.ratecontrol import RateClient, RateListener, pack_rate, unpack_rate


def parsed(config: AgentConfig) -> AgentConfig:
    args = build_parser().parse_args(config.argv())
    return from_args(args.command, args)


@pytest.mark.parametrize("config", [
    AgentConfig("plb"),
    AgentConfig("dcqcn", line_rate_bps=8e6, iface="h1-eth0", stats_path="/tmp/x.json", seed=3, tcp_ecn=False),
    AgentConfig("plb+dcqcn", round_s=0.05, plb=PlbParams(rehash_rounds=4, idle_rehash_rounds=0, cong_thresh=64,
                                                         suspend_rto_sec=2.5),
                line_rate_bps=2e6, report_interval_s=0.01,
                dcqcn=replace(DcqcnParams().scaled(2e6), g=1 / 16, cnp_interval_s=0.1, min_rate_bps=1e5)),
])
def test_configuration_survives_its_command_line(config) -> None:
    assert parsed(config) == config


def test_params_prints_dcqcn_scaled_to_the_line(capsys) -> None:
    assert main(["params", "--line-rate", "10M"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["time_scale"] == pytest.approx(4000) and out["cnp_interval_s"] == pytest.approx(0.2)
    assert out["g"] == 1 / 256


def test_bad_values_are_refused_naming_them(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["plb", "--cong-thresh", "300"])
    assert stop.value.code == 2 and "cong_thresh 300" in capsys.readouterr().err
    assert parse_rate("8.6Mbit") == 8.6e6 and parse_rate("1G") == 1e9 and parse_rate("500k") == 5e5
    with pytest.raises(ValueError, match="rate 'fast'"):
        parse_rate("fast")
    with pytest.raises(ValueError, match="mode 'ecmp'"):
        AgentConfig("ecmp")


def test_flow_keys_name_roce_flows_by_queue_pair() -> None:
    k = FlowKey.roce("fd00::1", "fd00::2", 7)
    assert (k.sport, k.dport, k.is_roce, k.family) == (0, 4791, True, 6)
    assert k.describe() == "udp [fd00::1] -> [fd00::2]:4791 qp 7"
    assert FlowKey("10.0.0.1", "10.0.0.2", "tcp", 40000, 5001).describe() == "tcp 10.0.0.1:40000 -> 10.0.0.2:5001"
    with pytest.raises(ValueError, match="two IP versions"):
        FlowKey("10.0.0.1", "fd00::2", "udp", 1, 2)


def test_stats_files_become_prometheus_metrics(tmp_path) -> None:
    flow = SentFlowStats("udp 10.0.0.1 -> 10.0.1.2:4791 qp 3", "10.0.0.1", "10.0.1.2", "udp", 0, 4791, 3,
                         packets=100, repaths=2, ce_fraction=0.75, rate_bps=5e6, alpha=0.5, cnps=4)
    running = AgentStats("h1", "plb+dcqcn", "h1-eth0", 1, 0.0, 1.0, Totals(rounds=40, congested_rounds=30, repaths=2,
                                                                            cnps_received=4), [flow])
    stopped = AgentStats("h2", "plb", "h2-eth0", 2, 0.0, 1.0, Totals(cnps_sent=9), stopped=True)
    running.write(tmp_path / "h1.json")
    stopped.write(tmp_path / "h2.json")
    (tmp_path / "junk.json").write_text("{not json")
    assert AgentStats.read(tmp_path / "h1.json") == running
    registry = CollectorRegistry()
    registry.register(AgentCollector(tmp_path))
    text = generate_latest(registry).decode()
    for line in ('aifabric_hostagent_up{host="h1",mode="plb+dcqcn"} 1.0',
                 'aifabric_hostagent_up{host="h2",mode="plb"} 0.0',
                 'aifabric_hostagent_plb_repaths_total{host="h1"} 2.0',
                 'aifabric_hostagent_plb_congested_rounds_total{host="h1"} 30.0',
                 'aifabric_hostagent_cnps_sent_total{host="h2"} 9.0',
                 'aifabric_hostagent_flow_ce_fraction{flow="udp 10.0.0.1 -> 10.0.1.2:4791 qp 3",host="h1"} 0.75',
                 'aifabric_hostagent_flow_rate_bits_per_second{flow="udp 10.0.0.1 -> 10.0.1.2:4791 qp 3",host="h1"} 5e+06'):
        assert line in text, line


def test_rate_control_messages_reach_a_listener() -> None:
    assert unpack_rate(pack_rate(7, 1.5e6)) == (7, 1.5e6)
    assert unpack_rate(b"HARC" + bytes(12)) is None and unpack_rate(b"short") is None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    listener = RateListener(port)
    client = RateClient(port)
    try:
        client.set_rate(1, 2e6)
        client.set_rate(2, 3e6)
        client.sock.sendto(b"garbage", ("127.0.0.1", port))
        got = []
        for _ in range(100):
            got += listener.poll()
            if len(got) == 2 and listener.ignored:
                break
            os.sched_yield()
        assert got == [(1, 2e6), (2, 3e6)] and listener.ignored == 1
    finally:
        listener.close()
        client.close()


def test_aifabric_up_checks_the_hostagent_flag(capsys) -> None:
    from aifabric.cli import build_parser as aifabric_parser
    from aifabric.cli.validate import validate

    with pytest.raises(SystemExit) as stop:
        aifabric_parser().parse_args(["up", "--hostagent", "ecmp"])
    assert stop.value.code == 2 and "--hostagent" in capsys.readouterr().err
    args = aifabric_parser().parse_args(["up", "--hostagent", "plb+dcqcn", "--metrics", "127.0.0.1:0",
                                         "--target", "softswitch"])
    from aifabric.cli.validate import check_hostagent
    try:
        check_hostagent("plb")
    except ValueError as err:                         # no bcc or headers here: said before bring-up
        assert "bcc" in str(err)
    else:
        validate(args)                                # --metrics is served with --hostagent alone
    with pytest.raises(ValueError, match="--metrics needs --int, --hostagent or --failover"):
        validate(aifabric_parser().parse_args(["up", "--metrics", "127.0.0.1:0", "--target", "softswitch"]))
