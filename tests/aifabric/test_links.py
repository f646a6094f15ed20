"""The lab's link rates: units as a user writes them, Ethernet's cost per frame, what a plan
converts for a target that counts packets, and every bench's ``--rate`` taking them."""
from __future__ import annotations

import argparse

import pytest

from aifabric.lab.links import MTU_FRAME, LinkPlan, LinkRate, rate_arg


@pytest.mark.parametrize("text, value, unit", [
    ("10", 10e6, "bit"), ("2.5", 2.5e6, "bit"), ("10M", 10e6, "bit"), ("10Mbit", 10e6, "bit"),
    ("10mbps", 10e6, "bit"), ("500k", 500e3, "bit"), ("500kbit", 500e3, "bit"), ("1G", 1e9, "bit"),
    ("1Gbit/s", 1e9, "bit"), ("1000pps", 1000, "pps"), (" 40 PPS ", 40, "pps"), (".5M", 0.5e6, "bit"),
])
def test_rates_parse_in_the_units_people_write(text, value, unit):
    rate = LinkRate.parse(text)
    assert (rate.value, rate.unit) == (value, unit)


@pytest.mark.parametrize("text, words", [
    ("fast", ["'fast'", "Mbit/s", "pps"]), ("10Mpps", ["'10Mpps'"]), ("-3", ["'-3'"]), ("", ["''"]),
    ("0", ["0 bit/s", "must be"]), ("0pps", ["0 packets/s", "must be"]), ("2.5pps", ["whole number"]),
    ("1000G", ["1000 Gbit/s", "must be"]),
])
def test_bad_rates_are_named(text, words):
    with pytest.raises(ValueError) as err:
        LinkRate.parse(text)
    for w in words:
        assert w in str(err.value)
    with pytest.raises(argparse.ArgumentTypeError):
        rate_arg(text)


def test_a_frame_costs_its_wire_bytes():
    """10 Mbit/s carries 10e6 / (1538 * 8) full frames a second: 1514 bytes + 24 of FCS, preamble
    and gap; a 42-byte frame is padded to 60 first (84 bytes on the wire)."""
    rate = LinkRate.parse("10M")
    assert rate.packets_per_s(MTU_FRAME) == pytest.approx(10e6 / (1538 * 8))
    assert rate.packets_per_s(42) == pytest.approx(10e6 / (84 * 8))
    assert rate.seconds(1000, frames=10) == pytest.approx(10 * 1024 * 8 / 10e6)
    assert rate.payload_bytes_per_s(1338, 1280) == pytest.approx(10e6 / (1362 * 8) * 1280)
    assert rate.bits_per_s(64) == 10e6                       # a rate in bits is one whatever the frame


def test_a_rate_in_packets_is_the_same_for_every_frame():
    rate = LinkRate.parse("1000pps")
    assert rate.packets_per_s(64) == rate.packets_per_s(MTU_FRAME) == 1000
    assert rate.bits_per_s(MTU_FRAME) == 1000 * 1538 * 8
    assert str(rate) == "1000 packets/s"


def test_bmv2_gets_the_bit_rate_in_frames_of_the_plan():
    """BMv2 counts packets: 10 Mbit/s of 1338-byte frames is 918 a second (1362 wire bytes each)."""
    assert LinkPlan(LinkRate.parse("10M"), frame_bytes=1338).bmv2_packets_per_s() == 918
    assert LinkPlan(LinkRate.parse("1k"), frame_bytes=MTU_FRAME).bmv2_packets_per_s() == 1     # never 0: unlimited
    assert "1338-byte frames" in LinkPlan(LinkRate.parse("400pps"), frame_bytes=1338).describe()


@pytest.mark.parametrize("argv", [
    ["bench", "collectives", "--rate", "5"],
    ["bench", "collectives"],
    ["bench", "lb", "--rate", "1000pps", "--packets", "10"],
    ["bench", "train", "--rate", "2M"],
    ["demo", "allreduce", "--rate", "2.5M"],
    ["demo", "train", "--rate", "500k"],
    ["train", "--preset", "tiny", "--rate", "1M"],
])
def test_every_rate_option_takes_a_rate_and_passes_the_checks(argv, tmp_path):
    """The command lines parse and pass the checks made before any bring-up (``bench collectives``
    crashed there on an option of load balancing's)."""
    from aifabric.cli import build_parser
    from aifabric.cli.validate import validate

    args = build_parser().parse_args(argv + (["--json", str(tmp_path / "f.json")] if argv[0] != "train" else []))
    if getattr(args, "rate", None) is not None:
        assert isinstance(args.rate, LinkRate)
    if args.command in ("bench", "demo") and args.which != "train":
        validate(args)
