"""p4c's STF packet tests, run on softswitch or on BMv2 (simple_switch).

    from softswitch.stf import run_stf
    result = run_stf("prog.json", "prog.stf", target="softswitch")   # or "bmv2"
    print(result.summary()); assert result.passed

The command line: ``softswitch stf PROGRAM.json TEST.stf [--target softswitch|bmv2]``.
statements.py reads the format, names.py resolves its names against the JSON, runner.py
runs it, expect.py compares the frames; softswitch_target.py and emulation.stf_bmv2 drive the two
targets.
"""
from .errors import StfError, Unsupported
from .runner import StfResult, run_stf
from .statements import parse, parse_file

__all__ = ["StfError", "StfResult", "Unsupported", "parse", "parse_file", "run_stf"]
