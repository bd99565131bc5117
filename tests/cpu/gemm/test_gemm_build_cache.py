"""The gemm study's compile step goes through the generic compile rule, like every study's, and
its per-variant build is cached (issue: "a rerun with nothing changed recompiles nothing"):
``snakemake build/compile/gemm/resources.csv`` in a copy of the checkout, with two variants (one
SM90, one SM100; about 35 s of nvcc on 2 cores), runs one nvcc job per variant, a library per
architecture and the compile rule, which collects both variants into resources.csv; again with
nothing changed, no job runs. After a change to the SM90 template the schedule (a dry run: what
Snakemake would rebuild, without a third nvcc run) holds only the SM90 variant's object and library. The two are cp.async mainloops, so with
test_gemm_compile.py's TMA ones (the default run's) ``pytest -m exhaustive`` (CI's second test
command) compiles and SASS-checks both load paths of both architectures; `snakemake kernels`
builds every variant. Exhaustive, not default: about 4 minutes of nvcc on 2 cores, and the
rerun logic it checks is the compile DAG's, which test_compile_dag.py checks by default."""
import re

import pandas as pd
import pytest
import yaml
from pipeline_run import copy_checkout, jobs_run, output_of, snakemake

pytestmark = [pytest.mark.slow, pytest.mark.exhaustive]

ONE_VARIANT = {"dtypes": ["bf16"], "tiles": [[128, 128, 64]], "clusters": [[1, 1]]}
RESOURCES = "build/compile/gemm/resources.csv"
SMALL = {"studies": {"gemm": {"variants": {"sm90": {"mainloops": ["cpasync_cooperative"], **ONE_VARIANT},
                                           "sm100": {"mainloops": ["cpasync_1sm"], **ONE_VARIANT}}}}}


def build(root, *options):
    result = snakemake(root, "-c2", RESOURCES, "--configfile", "small.yaml", *options)
    assert result.returncode == 0, output_of(result)[-3000:]
    return result


def test_a_rerun_rebuilds_only_what_changed(tmp_path):
    root = copy_checkout(tmp_path)
    (root / "small.yaml").write_text(yaml.safe_dump(SMALL))
    first = jobs_run(build(root))
    assert first["gemm_object"] == 2 and first["gemm_library"] == 2 and first["compile"] == 1, first
    assert sorted(pd.read_csv(root / RESOURCES).variant) == ["sm100_cpasync_1sm_bf16_t128x128x64_c1x1",
                                                             "sm90_cpasync_cooperative_bf16_t128x128x64_c1x1"]
    assert "Nothing to be done" in output_of(build(root))
    template = root / "kernels" / "gemm" / "gemm_sm90.cuh"
    template.write_text(template.read_text() + "\n// touched by the test\n")
    scheduled = build(root, "--dry-run")
    rebuilt = jobs_run(scheduled)
    assert rebuilt["gemm_object"] == 1 and rebuilt["gemm_library"] == 1, rebuilt
    object_jobs = re.findall(r"rule gemm_object:\n(.*?)\n\n", output_of(scheduled), flags=re.DOTALL)
    assert len(object_jobs) == 1 and "sm90_cpasync_cooperative" in object_jobs[0], object_jobs
