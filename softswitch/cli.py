"""``softswitch``: the command line, shaped after simple_switch_grpc's.

    softswitch [options] [program.json | --no-p4]
    softswitch stf PROGRAM.json TEST.stf [--target softswitch|bmv2]   (stf/cli.py)
    softswitch group FILE      many devices in one process, a command line each  (group.py)

Options simple_switch_grpc takes after its ``--`` separator (``--grpc-server-addr``,
``--cpu-port``, ``--drop-port``) are accepted before or after a ``--``, so the same command
line works for both targets.
"""
from __future__ import annotations

import os
import sys

from .options import START_ERRORS, parse_config, setup_logging, start_error, wait_for_signal
from .switch import Switch

# How long a thread may hold Python's interpreter lock while others wait for it (Python's
# default: 5 ms). A pipeline push rebuilding thousands of entries runs flat out for hundreds of
# ms; at 5 ms a turn, every Write and Read that arrives meanwhile waits a turn at each step of
# its handling (a lock, a gRPC event) and most of them finished only after the push: the
# journalled Writes of device.py went on in name only. 0.5 ms turns cost the push about a third
# of its speed and let most of them finish before it (tests/softswitch/test_p4runtime_limits.py).
INTERPRETER_TURN_S = 0.0005


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    sys.setswitchinterval(INTERPRETER_TURN_S)       # for one switch and for a group of them
    if argv[:1] == ["stf"]:
        from .stf.cli import main as stf_main
        return stf_main(argv[1:])
    if argv[:1] == ["group"]:
        from .group import main as group_main
        return group_main(argv[1:])
    # gRPC's core would print its own lines for a busy address; our error says it once.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    try:
        cfg, args = parse_config(argv)
        setup_logging(args.log_level, args.log_file)
        switch = Switch(cfg)
        switch.start()
    except START_ERRORS as e:
        print(f"softswitch: error: {start_error(e)}", file=sys.stderr)
        return 2
    print(f"softswitch: device {cfg.device_id} ready, P4Runtime on {cfg.grpc_addr}", flush=True)
    wait_for_signal()
    switch.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
