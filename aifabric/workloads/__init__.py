"""Training workloads from a model's shape: every rank's operations of one iteration.

Pure Python over descriptions (no fabric, no Mininet): a `Job` (a `ModelShape`, its
`Parallelism`, the GPUs' sustained TFLOP/s; `presets`, or `spec_file.load_job` for a YAML/JSON
file), ranks placed on a `topologies.fabric.Fabric`'s hosts (`placement.place`), the ops of each
rank with their sizes and dependencies (`generator.generate`), one factor that scales them down
to the emulated links (`scale`), and an analytic link-bound step time to compare measurements
with (`estimate.estimate`).
"""
from aifabric.workloads.errors import WorkloadError
from aifabric.workloads.estimate import Estimate, estimate
from aifabric.workloads.generator import Workload, generate
from aifabric.workloads.job import Job
from aifabric.workloads.ops import Kind, Op, Stream
from aifabric.workloads.parallelism import Parallelism
from aifabric.workloads.placement import Placement, place
from aifabric.workloads.presets import PRESETS, preset
from aifabric.workloads.scale import Scale, fit
from aifabric.workloads.shape import ModelShape
from aifabric.workloads.spec_file import load_job

__all__ = ["Estimate", "Job", "Kind", "ModelShape", "Op", "PRESETS", "Parallelism", "Placement", "Scale", "Stream",
           "Workload", "WorkloadError", "estimate", "fit", "generate", "load_job", "place", "preset"]
