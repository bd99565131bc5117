"""Build the GEMM variants: one nvcc translation unit per variant, linked per architecture.

    python -m tma_study.gemm_lib.build source    VARIANT --out build/gemm/src/VARIANT.cu
    python -m tma_study.gemm_lib.build object    VARIANT --source ... --out build/gemm/obj/VARIANT.o
    python -m tma_study.gemm_lib.build link      ARCH --objects ... --out build/gemm/libgemm_ARCH.so

The gemm study's own Snakemake rules (workflow/rules/gemm.smk) run one ``object`` job per
variant, so variants compile in parallel and an unchanged variant is not rebuilt. Each object
job also keeps the variant's cubin, its SASS (nvdisasm) and a JSON report: registers, spills, the
SASS counts the variant must show (UTMALDG for TMA, LDGSTS for cp.async, HGMMA / UTC*MMA for the
MMA), and whether ptxas serialised wgmma. The study's compile step (``compile_step``, run by the
generic compile rule like every study's: ``tma-study compile gemm``) collects the reports into
build/compile/gemm/resources.csv and fails when any check fails; ``compile_inputs`` names the
reports and libraries it needs, so the workflow builds them first.

Tools come from the environment: ``$NVCC``, else ``nvcc`` on PATH, else ``$CUDA_HOME/bin/nvcc``,
else the nvcc of PyPI's CUDA wheels (cuda-toolkit[nvcc], a dependency). CUTLASS's headers come
from the PyPI wheel nvidia-cutlass (cutlass_library/source/include and tools/util/include).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tma_study.config import REPO_ROOT
from tma_study.harness.kernel_builds import COMPILE_RECORD
from tma_study.harness.provenance import utc_now

from . import variants as variants_mod

CUTLASS_PACKAGE = "nvidia-cutlass==4.2.0.0"
TEMPLATE_DIR = REPO_ROOT / "kernels" / "gemm"      # the CUTLASS templates (gemm_sm90.cuh, ...)
BUILD_FOLDER = Path("build") / "gemm"              # sources, objects, reports and libraries
BUILD_DIR = REPO_ROOT / BUILD_FOLDER

# -DNDEBUG is not optional: without it CUTLASS's device asserts make ptxas serialise wgmma.
COMMON_FLAGS = ("-std=c++17", "-O3", "-DNDEBUG", "--expt-relaxed-constexpr", "-Xcompiler=-fPIC",
                "--resource-usage")
# code=sm_XXa only: the same SASS as -arch=sm_XXa without the embedded PTX (no JIT fallback
# is wanted: the arch-specific 'a' features cannot run elsewhere anyway).
ARCH_FLAGS = {arch: (f"-gencode=arch=compute_{flag[3:]},code={flag}",)
              for arch, flag in variants_mod.ARCH_FLAG.items()}
WGMMA_SERIALIZED = "C7510"          # ptxas: "wgmma.mma_async instructions are serialized"
SASS_OPCODE = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)", re.MULTILINE)
PTXAS_USED = re.compile(r"Used (\d+) registers")
PTXAS_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


class BuildToolError(RuntimeError):
    """A compiler, disassembler or header set the GEMM build needs is missing."""


class SassCheckError(AssertionError):
    """A variant's SASS lacks an instruction it is named for (or has one it must not)."""


def flags(arch: str) -> list[str]:
    """nvcc flags of one architecture's variants (include paths are added at run time)."""
    return [*COMMON_FLAGS, *ARCH_FLAGS[arch]]


def _wheel_tool(name: str) -> Path | None:
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(root) / "cu13" / "bin" / name
        if candidate.is_file():
            return candidate
    return None


def find_tool(name: str, variable: str | None = None) -> Path:
    """$VARIABLE, PATH, $CUDA_HOME/bin, then PyPI's CUDA wheels; BuildToolError if none."""
    candidates = [os.environ.get(variable) if variable else None, shutil.which(name)]
    if os.environ.get("CUDA_HOME"):
        candidates.append(str(Path(os.environ["CUDA_HOME"]) / "bin" / name))
    candidates.append(_wheel_tool(name))
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise BuildToolError(
        f"{name} not found (looked at ${variable or name.upper()}, PATH, $CUDA_HOME/bin and PyPI's CUDA "
        f"wheels): install a CUDA 13 toolkit, or `pip install 'cuda-toolkit[nvcc]==13.0.*' "
        f"nvidia-cuda-nvdisasm` (both are dependencies of this project: pip install -e .)")


def cutlass_include_dirs() -> list[Path]:
    """CUTLASS's include folders inside the nvidia-cutlass wheel (found without importing it)."""
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or not spec.submodule_search_locations:
        raise BuildToolError(f"CUTLASS headers not found: `pip install {CUTLASS_PACKAGE}` (a dependency "
                             "of this project) provides them in cutlass_library/source/include")
    source = Path(next(iter(spec.submodule_search_locations))) / "source"
    dirs = [source / "include", source / "tools" / "util" / "include"]
    if not (dirs[0] / "cutlass" / "cutlass.h").is_file() or not (dirs[1] / "cutlass" / "util").is_dir():
        raise BuildToolError(f"the cutlass_library package at {source.parent} has no CUTLASS headers "
                             f"(cutlass/cutlass.h); reinstall `{CUTLASS_PACKAGE}`")
    return dirs


def tool_version(tool: Path) -> str:
    out = subprocess.run([str(tool), "--version"], capture_output=True, text=True, check=False).stdout
    return out.strip().splitlines()[-1] if out.strip() else "unknown"


def compile_command(arch: str, source: Path, output: Path, keep_dir: Path) -> list[str]:
    includes = [f"-I{TEMPLATE_DIR}", *(f"-I{d}" for d in cutlass_include_dirs())]
    return [str(find_tool("nvcc", "NVCC")), *flags(arch), *includes, "-c", str(source), "-o", str(output),
            "--keep", f"--keep-dir={keep_dir}"]


def opcode_counts(sass: str) -> Counter:
    return Counter(SASS_OPCODE.findall(sass))


def check_sass(variant: variants_mod.Variant, counts: Counter) -> dict:
    """{prefix: count} of the required and forbidden prefixes, and the problems found."""
    required, forbidden = variant.expected_sass()
    found = {p: sum(n for op, n in counts.items() if op.startswith(p)) for p in (*required, *forbidden)}
    problems = [f"{variant.name}: no {p} in its SASS" for p in required if found[p] == 0]
    problems += [f"{variant.name}: {found[p]} {p} in its SASS, expected none" for p in forbidden if found[p]]
    return {"found": found, "problems": problems}


def compile_variant(name: str, source: Path, output: Path) -> dict:
    """Compile one variant to ``output`` (.o); beside it: .cubin, .sass and .json (the report)."""
    variant = variants_mod.parse_name(name)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"gemm-{name}-") as keep:
        command = compile_command(variant.arch, Path(source), output, Path(keep))
        started, started_utc = time.perf_counter(), utc_now()
        result = subprocess.run(command, capture_output=True, text=True, check=False)  # log kept on failure
        seconds = time.perf_counter() - started
        log = result.stdout + result.stderr
        if result.returncode != 0:
            raise subprocess.CalledProcessError(result.returncode, command, log)
        cubins = sorted(Path(keep).glob("*.cubin"))        # one target per variant: one cubin
        if len(cubins) != 1:
            raise BuildToolError(f"nvcc --keep left {len(cubins)} cubins for {name}, expected one")
        cubin = output.with_suffix(".cubin")
        shutil.copyfile(cubins[0], cubin)
    nvdisasm = find_tool("nvdisasm")
    sass = subprocess.run([str(nvdisasm), "-c", str(cubin)], capture_output=True, text=True, check=True).stdout
    output.with_suffix(".sass").write_text(sass)
    counts = opcode_counts(sass)
    checked = check_sass(variant, counts)
    registers = [int(n) for n in PTXAS_USED.findall(log)]
    spills = [tuple(map(int, s)) for s in PTXAS_SPILL.findall(log)]
    report = {
        **variant.columns(),
        "compile_seconds": round(seconds, 1),
        "started_utc": started_utc, "finished_utc": utc_now(),
        "nvcc": str(command[0]), "nvcc_version": tool_version(Path(command[0])),
        "nvdisasm_version": tool_version(nvdisasm),
        "flags": " ".join(flags(variant.arch)),
        "registers": max(registers, default=-1),
        "spill_store_bytes": max((s for s, _ in spills), default=0),
        "spill_load_bytes": max((lo for _, lo in spills), default=0),
        "wgmma_serialized": WGMMA_SERIALIZED in log,
        "sass_instructions": sum(counts.values()),
        "expected_sass": " ".join(f"{p}x{n}" for p, n in checked["found"].items()),
        "problems": checked["problems"] + ([f"{name}: ptxas serialised wgmma ({WGMMA_SERIALIZED})"]
                                           if WGMMA_SERIALIZED in log else []),
    }
    output.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"compiled {name} in {seconds:.0f} s: {report['registers']} registers, "
          f"{report['expected_sass']}" + ("; PROBLEMS: " + "; ".join(report["problems"]) if report["problems"] else ""),
          flush=True)
    return report


def link(objects: list[Path], output: Path) -> None:
    """One shared library of every variant object of one architecture (cudart linked statically)."""
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    nvcc = find_tool("nvcc", "NVCC")
    # PyPI's CUDA wheels keep libcudart_static.a and libcudadevrt.a in <toolkit>/lib, where their
    # nvcc does not look by itself; a system toolkit's lib64 is on nvcc's own search path.
    wheel_lib = Path(nvcc).resolve().parent.parent / "lib"
    search = [f"-L{wheel_lib}"] if (wheel_lib / "libcudart_static.a").exists() else []
    command = [str(nvcc), "-shared", "-cudart=static", *search, *map(str, objects), "-o", str(output)]
    subprocess.run(command, check=True)


def object_inputs(chosen: list) -> list[str]:
    """The object job's report and object of each variant in ``chosen`` (paths relative to the
    checkout): the compile inputs of a study that links some of this study's variants."""
    out = []
    for variant in chosen:
        report = report_path(variant.name, BUILD_FOLDER)
        out += [report.as_posix(), report.with_suffix(".o").as_posix()]
    return out


def link_study_library(study: str, inputs: list[str], out_dir: Path, library: Path) -> None:
    """resources.csv of the reports among ``inputs`` in ``out_dir`` and one library of their objects
    at ``library`` (BuildToolError naming the missing files and the rule that builds them)."""
    paths = [REPO_ROOT / p for p in inputs]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise BuildToolError(
            f"{len(missing)} files of the {study} variants are not built ({', '.join(missing[:2])}, ...): "
            f"build them through the workflow: snakemake -c16 build/compile/{study}/resources.csv")
    collect_resources([p for p in paths if p.suffix == ".json"], Path(out_dir) / "resources.csv")
    link([p for p in paths if p.suffix == ".o"], library)


def report_path(variant: str, build_dir: Path = BUILD_DIR) -> Path:
    """The JSON report the object job of ``variant`` writes beside its object."""
    return Path(build_dir) / "obj" / f"{variant}.json"


def library_path(arch: str, build_dir: Path = BUILD_DIR) -> Path:
    return Path(build_dir) / f"libgemm_{arch}.so"


def compile_inputs(study_config: dict) -> list[str]:
    """What the compile step needs from the study's own build rules (paths relative to the
    checkout): every configured variant's report and each architecture's library."""
    names = {arch: [v.name for v in variants_mod.variants(study_config, arch)] for arch in variants_mod.ARCHES}
    reports = [report_path(name, BUILD_FOLDER).as_posix() for arch in variants_mod.ARCHES for name in names[arch]]
    return reports + [library_path(arch, BUILD_FOLDER).as_posix() for arch in variants_mod.ARCHES if names[arch]]


def compile_step(study, study_config: dict, out_dir: Path, workers: int = 1) -> None:
    """The gemm study's compile step: ``out_dir``/resources.csv (and compile.json) from the reports
    of the configured variants, which the per-variant nvcc jobs wrote first (``workers`` is
    unused: the workflow runs those jobs in parallel)."""
    reports = [REPO_ROOT / path for path in compile_inputs(study_config) if path.endswith(".json")]
    missing = [str(path) for path in reports if not path.is_file()]
    if missing:
        raise BuildToolError(f"{len(missing)} GEMM variants are not built ({', '.join(missing[:3])}, ...): "
                             "build them through the workflow: snakemake -c16 build/compile/gemm/resources.csv")
    collect_resources(reports, Path(out_dir) / "resources.csv")


def collect_resources(reports: list[Path], output: Path) -> None:
    """resources.csv of every variant, and beside it compile.json (the compile step's record for
    provenance: from the first variant's start to the last's end, so a variant kept from an
    earlier build stretches it); SassCheckError when any variant failed a check."""
    import pandas as pd

    rows = [json.loads(Path(p).read_text()) for p in reports]
    problems = [problem for row in rows for problem in row.pop("problems")]
    spans = [(row.pop("started_utc", None), row.pop("finished_utc", None)) for row in rows]
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    if problems:
        raise SassCheckError("GEMM variants failed their SASS checks:\n  " + "\n  ".join(problems))
    pd.DataFrame(rows).sort_values("variant").to_csv(output, index=False)
    if all(started and finished for started, finished in spans):
        record = {"started_utc": min(s for s, _ in spans), "finished_utc": max(f for _, f in spans),
                  "workers": "one nvcc per Snakemake job", "builds": len(rows), "refused": 0,
                  "cache_hits": 0, "compiled": len(rows), "not_cacheable": 0,
                  "nvcc_seconds_total": round(sum(row["compile_seconds"] for row in rows), 1)}
        (output.parent / COMPILE_RECORD).write_text(json.dumps(record, indent=2) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tma_study.gemm_lib.build", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("source")
    p.add_argument("variant")
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("object")
    p.add_argument("variant")
    p.add_argument("--source", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("link")
    p.add_argument("arch", choices=variants_mod.ARCHES)
    p.add_argument("--objects", type=Path, nargs="+", required=True)
    p.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "source":
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(variants_mod.render_source(variants_mod.parse_name(args.variant)))
        elif args.command == "object":
            compile_variant(args.variant, args.source, args.out)
        else:
            link(args.objects, args.out)
    except (BuildToolError, SassCheckError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as error:
        print(f"error: {' '.join(map(str, error.cmd))} failed (exit {error.returncode}):\n{error.output or ''}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
