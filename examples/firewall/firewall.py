"""A firewall for an aifabric fabric, written as a user's controller app (p4runtime-shell).

It drops, at every edge switch, the IPv4 packets of one protocol to one destination port (say
UDP to 5000), by writing entries into the fabric program's ``acl`` table::

    python examples/firewall/firewall.py --fabric fabric.json block udp 5000
    python examples/firewall/firewall.py --fabric fabric.json list
    python examples/firewall/firewall.py --fabric fabric.json unblock udp 5000

``--fabric`` is the description file ``aifabric up --describe FILE`` (or the test fixture) wrote.
Where aifabric's controller runs (``"controller": {"kind": "aifabric"}`` in the file), the app
writes only the ``acl`` table, which aifabric's controller does not reconcile (it is not in
``owned_tables``), so the entries stay; it connects under its own P4Runtime role, ``firewall``,
with an election id of its own, and only for as long as a write takes: softswitch keeps roles
apart (both controllers are primary at once), BMv2's P4Runtime server as built here does not (the
app's higher election id makes it primary while its session lasts; aifabric's controller is
primary again as soon as it leaves). Where no controller runs
(``aifabric up --controller none``), the app is the switches' only controller: it takes the
default role and pushes the pipeline named in the file first.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from p4runtime_sh import shell as sh

ACL = "FabricIngress.acl.acl"
DROP = "FabricIngress.acl.drop"
ROLE = "firewall"
PROTOCOLS = {"icmp": 1, "tcp": 6, "udp": 17}
PRIORITY = 100
SETUP_ATTEMPTS = 3
ELECTION_ID = (0, 2)        # unique per device: BMv2 (PI) refuses an election id another stream uses, whatever its role


def edge_switches(description: dict) -> list[dict]:
    """The switches hosts are attached to."""
    attached = {h["switch"] for h in description["hosts"]}
    return [s for s in description["switches"] if s["name"] in attached]


@contextmanager
def session(description: dict, switch: dict, push_pipeline: bool = False) -> Iterator[None]:
    """A p4runtime-shell session with one switch, for as short a time as the work takes."""
    owner = description.get("controller", {}).get("kind", "none")
    config = None
    if owner == "none" and push_pipeline:
        pipeline = description["pipeline"]
        config = sh.FwdPipeConfig(pipeline["p4info"], pipeline["device_config"])
    for attempt in range(SETUP_ATTEMPTS):
        try:
            sh.setup(device_id=switch["device_id"], grpc_addr=switch["p4runtime_address"], election_id=ELECTION_ID,
                     role_name=ROLE if owner != "none" else None, config=config, verbose=False)
            break
        except SystemExit:      # p4runtime-shell exits when arbitration fails
            # BMv2 may still hold our previous session's stream (same election id) for a moment
            if attempt == SETUP_ATTEMPTS - 1:
                raise RuntimeError(f"{switch['name']}: no P4Runtime session at {switch['p4runtime_address']}") from None
            time.sleep(0.5)
    try:
        yield
    finally:
        sh.teardown()


def _entry(protocol: str, port: int) -> "sh.TableEntry":
    entry = sh.TableEntry(ACL)(action=DROP)
    entry.match["eth_type"] = "0x0800"
    entry.match["ip_proto"] = str(PROTOCOLS[protocol])
    entry.match["l4_dport"] = str(port)
    entry.priority = PRIORITY
    return entry


def block(description: dict, protocol: str, port: int) -> list[str]:
    """Drop ``protocol`` packets to ``port`` at every edge switch (pushing the pipeline first
    where no other controller runs); the switches' names."""
    done = []
    for switch in edge_switches(description):
        with session(description, switch, push_pipeline=True):
            _entry(protocol, port).insert()
        done.append(switch["name"])
    return done


def unblock(description: dict, protocol: str, port: int) -> list[str]:
    done = []
    for switch in edge_switches(description):
        with session(description, switch):
            _entry(protocol, port).delete()
        done.append(switch["name"])
    return done


def rules(description: dict) -> dict[str, list[str]]:
    """switch -> the ACL entries it holds, one line each."""
    out = {}
    for switch in edge_switches(description):
        with session(description, switch):
            out[switch["name"]] = [str(e).replace("\n", " ") for e in sh.TableEntry(ACL).read()]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="drop a protocol's packets to a port at every edge switch")
    p.add_argument("--fabric", required=True, type=Path, help="the fabric description file")
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("block", "unblock"):
        c = sub.add_parser(name)
        c.add_argument("protocol", choices=sorted(PROTOCOLS))
        c.add_argument("port", type=int)
    sub.add_parser("list")
    args = p.parse_args(argv)
    description = json.loads(args.fabric.read_text())
    if args.command == "list":
        print(json.dumps(rules(description), indent=2))
    else:
        done = (block if args.command == "block" else unblock)(description, args.protocol, args.port)
        print(f"{args.command} {args.protocol} {args.port}: {', '.join(done)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
