"""Every kernel a study times, compiled once per machine through one kernel cache.

A study's compile list (``Study.kernels``: study config -> [KernelBuild]) names each build.
The compile step (``tma-study compile``) compiles and SASS-checks them all into the cache
under ``build/kernel-cache/`` (``tma_kernels.cache``), in parallel processes; the measure
step takes the same builds from there (compiling only what is missing) and loads their
cubins on the GPU (``tma_kernels.loaded``); the tests' SASS checks read the same cache.
Each prints the cache's hit rate.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
from pathlib import Path

from tma_study.config import REPO_ROOT

CACHE_VARIABLE = "TMA_KERNEL_CACHE"
COMPILE_RECORD = "compile.json"     # beside resources.csv: when the compile step ran, what the cache held
RESOURCE_COLUMNS = ("kernel", "registers", "shared_bytes_static", "stack_frame_bytes", "spill_store_bytes",
                    "spill_load_bytes", "sass_instructions", "expected_sass")


@dataclasses.dataclass(frozen=True)
class KernelBuild:
    """One kernel of a study: its name, Python kernel function (launch bounds, if any, as its
    ``launch_bounds`` attribute), numba signature and the SASS instruction prefixes it must
    contain. ``may_be_refused``: ptxas may refuse it (a launch-bounded build whose register
    cap is too low), which is then recorded and left out, not an error."""

    name: str
    function: object
    signature: str
    expected_sass: tuple[str, ...]
    may_be_refused: bool = False


def cache_root() -> Path:
    """build/kernel-cache of this checkout, or $TMA_KERNEL_CACHE."""
    return Path(os.environ.get(CACHE_VARIABLE) or REPO_ROOT / "build" / "kernel-cache")


@functools.cache
def kernel_cache():
    """This process's kernel cache (its stats count this process's lookups)."""
    from tma_kernels.cache import KernelCache
    return KernelCache(cache_root())


def compile_build(build: KernelBuild):
    """``build`` compiled for sm_90a through the cache: a CompiledKernel, or the refusal's
    message (str) where the build may be refused and ptxas refused it."""
    from tma_kernels.build import CudaToolError
    try:
        return kernel_cache().compile(build.name, build.function, build.signature)
    except CudaToolError as error:
        if build.may_be_refused:
            return str(error)
        raise


def _refusal_allowed(build: KernelBuild, found):
    if isinstance(found, str) and not build.may_be_refused:
        from tma_kernels.build import CudaToolError
        raise CudaToolError(found)
    return found


def _compile_listed(study_name: str, study_config: dict, index: int):
    """(compiled build ``index`` of a study's compile list, its cache stats), in a worker
    process: the list holds closures, so each worker builds it again."""
    from tma_study.studies import discover
    build = discover()[study_name].entry("kernels")(study_config)[index]
    stats = kernel_cache().stats
    before = dataclasses.replace(stats)
    compiled = compile_build(build)
    return compiled, (stats.compiled - before.compiled, stats.uncacheable - before.uncacheable)


def compile_study_builds(study, study_config: dict, workers: int, label: str = "compile", stats=None):
    """[(KernelBuild, CompiledKernel or refusal message)] for the whole compile list: what the
    cache holds is taken from it here, the rest compiled in ``workers`` processes, with
    progress lines; prints the cache's hit rate at the end (and adds it to ``stats``, a
    tma_kernels.cache.CacheStats, where given)."""
    from tma_kernels.cache import CacheStats

    from .parallel_compile import process_map
    from .progress import Progress
    given = stats
    builds = study.entry("kernels")(study_config)
    cache = kernel_cache()
    hits_before = cache.stats.hits
    found = [_refusal_allowed(b, cache.lookup(b.name, b.function, b.signature)) for b in builds]
    stats = CacheStats(hits=cache.stats.hits - hits_before)
    missing = [i for i, f in enumerate(found) if f is None]
    progress = Progress(f"{study.name} {label}", len(missing), every=max(1, len(missing) // 20))
    for index, (compiled, (compiled_now, uncacheable)) in zip(missing, process_map(
            _compile_listed, [study.name] * len(missing), [study_config] * len(missing), missing,
            workers=workers)):
        found[index] = compiled
        stats.compiled += compiled_now
        stats.uncacheable += uncacheable
        progress.step(builds[index].name)
    print(f"[{study.name}] {stats.line()}", flush=True)
    if given is not None:
        given.hits, given.compiled, given.uncacheable = stats.hits, stats.compiled, stats.uncacheable
    return list(zip(builds, found))


def expected_counts(compiled, expected: tuple[str, ...]) -> dict[str, int]:
    """{instruction prefix: how many SASS instructions start with it}."""
    counts = compiled.opcode_counts()
    return {prefix: sum(n for op, n in counts.items() if op.startswith(prefix)) for prefix in expected}


def resource_row(compiled, expected: tuple[str, ...]) -> dict:
    """One row of resources.csv / kernels.csv for a compiled kernel."""
    found = expected_counts(compiled, expected)
    return {"kernel": compiled.name, "registers": compiled.registers,
            "shared_bytes_static": compiled.shared_bytes_static,
            "stack_frame_bytes": compiled.stack_frame_bytes,
            "spill_store_bytes": compiled.spill_store_bytes, "spill_load_bytes": compiled.spill_load_bytes,
            "sass_instructions": sum(compiled.opcode_counts().values()),
            "expected_sass": " ".join(f"{p}x{n}" for p, n in found.items())}


def missing_instructions(compiled, expected: tuple[str, ...]) -> list[str]:
    return [f"{compiled.name}: no {prefix} in its SASS"
            for prefix, n in expected_counts(compiled, expected).items() if n == 0]


class StudyKernels:
    """A measure run's kernels: the study's compile list taken from the kernel cache (what is
    missing compiled first, in parallel), each loaded onto the GPU on first use; remembers
    which were used, for the run's kernels.csv."""

    def __init__(self, study_name: str, study_config: dict, workers: int | None = None):
        from tma_kernels.cache import CacheStats

        from tma_study.studies import discover
        self.study_name = study_name
        self.stats = CacheStats()
        results = compile_study_builds(discover()[study_name], study_config, workers or os.cpu_count() or 1,
                                       "kernels", self.stats)
        self._builds = {build.name: (build, compiled) for build, compiled in results}
        self._loaded = {}

    def __getitem__(self, name: str):
        """The loaded kernel (a numba dispatcher) of build ``name``."""
        from tma_kernels.loaded import load
        if name not in self._loaded:
            build, compiled = self._builds[name]
            if isinstance(compiled, str):
                raise KeyError(f"{name} was refused by ptxas: {compiled}")
            self._loaded[name] = load(compiled, build.signature)
        return self._loaded[name]

    def compiled(self, name: str):
        return self._builds[name][1]

    def provenance(self) -> dict:
        """For provenance.json: what this run's kernel lookups found in the cache, and what the
        compile step recorded when it filled it (build/compile/<study>/compile.json)."""
        return {"kernel_cache": {"hits": self.stats.hits, "compiled": self.stats.compiled,
                                 "not_cacheable": self.stats.uncacheable},
                "compile_step": compile_record(REPO_ROOT / "build" / "compile" / self.study_name)}

    def table(self, names=None):
        """kernels.csv: the resources of the kernels used (or of ``names``), by name."""
        import pandas as pd
        chosen = sorted(self._loaded if names is None else names)
        return pd.DataFrame([resource_row(self._builds[n][1], self._builds[n][0].expected_sass) for n in chosen])


def compile_record(compile_dir: Path) -> dict | None:
    """What the compile step recorded (times, cache hits) for provenance; None without one."""
    path = Path(compile_dir) / COMPILE_RECORD
    return json.loads(path.read_text()) if path.is_file() else None


def load_cached(name: str, function, signature: str):
    """A launchable kernel (numba dispatcher) of ``function`` for ``signature``, compiled through
    the kernel cache (once per machine) and loaded from its cubin: as the measure step does,
    for the GPU tests and diagnostics."""
    from tma_kernels.loaded import load
    return load(kernel_cache().compile(name, function, signature), signature)
