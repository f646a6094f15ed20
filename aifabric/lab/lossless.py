"""The lab's lossless Ethernet: the traffic classes on every switch (controller.lossless.Lossless,
over each switch's run-time control), the hosts honouring PFC as NICs (hostagent.lossless.HostPause,
one compiled copy for every host) and the class poller (every switch's classes and pauses, for
Prometheus, the live page and the demo's picture). ``Lab(lossless=LosslessConfig(...))`` makes one
(``lab.lossless``); a run that limits the links (aifabric.lab.links.limit_links) gives the hosts'
pause timing the links' rate.

    lab.lossless.use("job", {3})          # class 3 lossless on every switch while the job runs
    lab.lossless.sender_pause()           # host -> a sender's --pause (hostagent.traffic)
    lab.lossless.poller.snapshot()        # switch -> port -> class -> figures

Its ``lab`` is the running `aifabric.lab.lab.Lab` (not imported here: the lab imports this).
"""
from __future__ import annotations

from typing import Iterable

from aifabric.lab.links import MTU_FRAME
from controller.lossless import (CallableControl, ClassPoller, Lossless, LosslessConfig, PfcThresholds, TrafficClass,
                                 Unsupported)
from controller.lossless.target import BMV2_PFC
from softswitch.pfc import NOMINAL_BITRATE
from softswitch.ports import interface_mac

RDMA_PRIORITY, RDMA_DSCP = 3, 26     # the lab's RoCE class: its egress queue and the DSCP that maps to it
# PAUSE at 16 full frames in a port's buffer of the class, XON at 8, 32 more taken in flight
RDMA_PFC = PfcThresholds(xoff=16 * MTU_FRAME, xon=8 * MTU_FRAME, headroom=32 * MTU_FRAME)


def rdma_classes(lossless: bool = False) -> LosslessConfig:
    """Class 3 ("rdma", DSCP 26, 512 packets deep) with PFC thresholds, everything else class 0
    as before; ``lossless``: class 3 lossless from the start (else while a job asks for it)."""
    return LosslessConfig((TrafficClass(RDMA_PRIORITY, (RDMA_DSCP,), "rdma", depth=512, pfc=RDMA_PFC),),
                          lossless=frozenset({RDMA_PRIORITY}) if lossless else frozenset())


def runtime_control(lab) -> CallableControl:
    """The lab's switches' run-time control (P4Switch.runtime_command) and target kinds."""
    return CallableControl(lambda sw, line: lab.switch(sw).runtime_command(line),
                           lambda sw: lab.switch(sw).target_kind)


def check_softswitch(lab) -> None:
    """Unsupported (saying why) unless every switch runs softswitch: PFC is softswitch's."""
    kinds = {lab.switch(sw.name).target_kind for sw in lab.fabric.switches}
    if kinds != {"softswitch"}:
        raise Unsupported(BMV2_PFC)


class LabLossless:
    def __init__(self, lab, config: LosslessConfig, *, poll_interval: float = 0.5, history: bool = False):
        self.lab, self.config = lab, config
        runtime = runtime_control(lab)
        self.classes = Lossless(lab.controller, config, runtime)
        self.poller = ClassPoller(runtime, [sw.name for sw in lab.fabric.switches], poll_interval, history=history)
        self.hosts = None             # hostagent.lossless.HostPause, once started
        self.host_ids: dict[str, int] = {}

    def start(self) -> "LabLossless":
        """The classes on every switch, the hosts' programs attached (their links at the nominal
        rate until `set_host_bitrate`), the poller running."""
        self.classes.apply()
        from hostagent.lossless import HostPause
        self.hosts = HostPause()
        dscp_class = self.config.dscp_class()
        for h in self.lab.fabric.hosts:
            node = self.lab.host(h.name)
            peer = interface_mac(f"{h.switch}-eth{h.port}")      # the switch port that sends it PFC frames
            self.host_ids[h.name] = self.hosts.attach(node.defaultIntf().name, f"/proc/{node.pid}/ns/net",
                                                      NOMINAL_BITRATE, dscp_class, peer)
        self.poller.start()
        return self

    def links_limited(self, bits_per_s: float) -> None:
        """The links were limited (aifabric.lab.links.limit_links, which set every queue of every
        port): the classes' queues again, and the hosts' link rate (what a PAUSE's quanta last)."""
        self.classes.apply()
        for host in self.host_ids.values():
            self.hosts.set_bitrate(host, round(bits_per_s))

    def use(self, job: str, priorities: Iterable[int]) -> None:
        self.classes.use(job, priorities)

    def release(self, job: str) -> None:
        self.classes.release(job)

    def sender_pause(self) -> dict[str, str]:
        """host -> its senders' ``--pause`` (hostagent.traffic)."""
        return {name: self.hosts.sender_arg(host) for name, host in self.host_ids.items()} if self.hosts else {}

    def stop(self) -> None:
        self.poller.stop()
        if self.hosts is not None:
            hosts, self.hosts = self.hosts, None
            hosts.close()
