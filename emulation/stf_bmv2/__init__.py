"""The STF runner's BMv2 target (softswitch.stf runs the file; this drives simple_switch): the
program on simple_switch, control-plane commands through its Thrift CLI (emulation.bmv2_cli),
frames on veths in a namespace of the run's own or, without root, on pcap files as p4c's runner."""
from .target import Bmv2Target

__all__ = ["Bmv2Target"]
