"""A softswitch device in this process, with no ports, no servers and no loop thread.

It takes what a switch takes over P4Runtime (the pipeline, then Write updates, through the same
`P4RuntimeDevice` the gRPC server calls) and runs a frame through the reference (Python)
packet path when asked, returning what the switch would have sent and out of which port. It is
how a controller or a host can ask "where would this switch send this packet?" with the switch's
own program and tables, instead of a second, hand-written copy of what the program computes
(`controller.load_balance.hash_paths` asks it for the fabric's ECMP choices).

The answer is the real switch's as long as both hold the same state: the same entities,
written in the same order (an action selector's member order is the order its members were
inserted, on BMv2 too).
"""
from __future__ import annotations

from typing import Iterable

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from .dataplane import Dataplane
from .p4runtime.device import P4RuntimeDevice
from .switch import Switch, SwitchConfig

SetConfig = p4runtime_pb2.SetForwardingPipelineConfigRequest


class OfflineSwitchError(RuntimeError):
    """A request the offline switch refused, or a frame it could not finish."""


class OfflineSwitch:
    def __init__(self, device_id: int, p4info: p4info_pb2.P4Info, device_config: bytes):
        self.device_id = device_id
        self._switch = Switch(SwitchConfig(device_id=device_id, native="off", compiled="off"))
        self._sent: list[tuple[int, bytes]] = []
        dp = Dataplane({})
        dp.transmit = lambda port, frame: self._sent.append((port, bytes(frame)))
        self._switch.dataplane = dp
        self._device = P4RuntimeDevice(self._switch)
        request = SetConfig(device_id=device_id, action=SetConfig.VERIFY_AND_COMMIT)
        request.config.p4info.CopyFrom(p4info)
        request.config.p4_device_config = device_config
        self._device.set_pipeline(request)

    def write(self, updates: Iterable[p4runtime_pb2.Update]) -> None:
        """Apply ``updates`` in order (OfflineSwitchError naming the first one refused)."""
        raw = [u.SerializeToString() for u in updates]
        request = p4runtime_pb2.WriteRequest(device_id=self.device_id,
                                             atomicity=p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR)
        for i, error in enumerate(self._device.write(request, raw)):
            if error is not None:
                raise OfflineSwitchError(f"device {self.device_id}: update {i} of {len(raw)} refused: {error}")

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """What the switch sends, (port, frame) in order, for ``frame`` arriving on ``port``."""
        dp = self._switch.dataplane
        self._sent.clear()
        errors = dp.counters.errors
        if not dp.run_through(port, [frame]):
            raise OfflineSwitchError(f"device {self.device_id}: the frame from port {port} was still "
                                     f"inside after the drain limit (the program loops)")
        if dp.counters.errors != errors:
            raise OfflineSwitchError(f"device {self.device_id}: the program failed on the frame from port {port}")
        return list(self._sent)

    def close(self) -> None:
        self._switch.dataplane.stop()
