"""The process ncu profiles for the multicast study's traffic table (``traffic.run_under_ncu``):
``python -m tma_study.studies.multicast.traffic_child CONFIG_JSON`` checks each configuration of
the file, then launches it once, in order. Needs a Hopper GPU."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from numba import cuda

from tma_study import gpu as gpu_mod
from tma_study.harness.buffers import ChecksumOutputs

from .measure import Case, compile_kernels, make_operands
from .traffic import traffic_config


def main(spec_file: str) -> None:
    """Check, then launch once, each configuration of ``spec_file`` in order."""
    specs = json.loads(Path(spec_file).read_text())
    gpu = gpu_mod.require_hopper(gpu_mod.detect())
    kernels = compile_kernels((specs[0]["release"],))
    study = {"working_sets": {"hbm": {"bytes": specs[0]["bytes"]}}}
    operands = make_operands(study, ("1d",))
    outputs = ChecksumOutputs()
    for spec in specs:
        case = Case(traffic_config(spec), kernels, operands, gpu.sm_count, outputs)
        case.check()
        case.launch(0)
        cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1])
