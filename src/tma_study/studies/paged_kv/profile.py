"""Where a paged_kv kernel waits: Nsight Compute's per-instruction stall samples of configurations.

A diagnostic, not part of the reference data: it writes under ``--out`` (never ``results/``)
and explains a rate rather than measuring one. The paper's account of the fp8 decode gap rests
on it ("a source-level profile, outside these data, points at the consumer").

    python -m tma_study.studies.paged_kv.profile --out build/profile/paged_kv KEY [KEY ...]
    python -m tma_study.studies.paged_kv.profile --list        # every configuration key
    python -m tma_study.studies.paged_kv.profile --durations --out DIR KEY [KEY ...]

KEY is a configuration of the sweep in ``--config`` (``SweepConfig.key``, e.g.
``llama3_8b/e4m3/decode-q1-b32-ctx8192/page256/cp_async/s2p1/kq``). For each key, ncu runs this
module's child, which builds the kernel and split count exactly as measure.py does (launch
bounds included) and launches it three times; ncu profiles the third launch with clock control
off (the GPU's clocks are left as they are) and writes ``<out>/<key with / as _>.csv``, the
SASS view with stall samples per instruction. A summary is printed and written beside it:
the share of stall samples per reason and per opcode, and the hottest instructions with their
execution counts. The wait loop of the mbarrier a warp waits on tells who waits: its execution
count is (warps x tiles) of the producer when it waits for a free stage, of the consumer when it
waits for K/V. A second ncu pass over the same launch reads how busy each SM pipe was
(``PIPE_METRICS``: instructions issued to the ALU, FMA, tensor, load/store and XU pipes as a
share of their peak over active cycles, and the issue slots used) and writes
``<out>/<key>.pipes.csv``; the summary adds those shares and the executed instructions by
opcode. On sm_90a the fp8 -> fp16 unpack (``F2FP.F16.E4M3.UNPACK_B``) issues to the ALU pipe,
beside LOP3, PRMT and the shifts, so the ALU share is where an fp8 consumer's conversions show.
With ``--durations`` it runs one other pass instead: each kernel's duration (``gpu__time_duration``)
over every launch of the child, the attention and, with splits, the split combine, written to
``<out>/<key>.durations.csv``; the summary gives the last launch's kernels (and the SM clock each
ran at) and their sum next to the median (and mean SM clock) the reference data
(``--reference``) timed for the key: the difference is what the timed launch spends outside the
two kernels (launch, the gap before the combine) and what a different clock moved. When each
pass first ran, and where its numbers are: docs/paged_kv_history.md.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import csv
import io
import shutil
import subprocess
import sys
from pathlib import Path

from tma_study import config as config_mod
from tma_study.harness.ncu import number as _number
from tma_study.harness.ncu import raw_page

from .grid import sweep_configs

LAUNCHES = 3                    # the child launches each configuration this often; ncu takes the last
KERNEL_REGEX = "regex:paged_attention_"
SECTIONS = ("SourceCounters", "WarpStateStats")
#: the second pass's metrics: per-pipe instruction issue (% of peak over active cycles), issue slots
#: used, DRAM throughput (% of peak over the kernel), and SM clock
PIPE_METRICS = tuple(f"sm__inst_executed_pipe_{pipe}.avg.pct_of_peak_sustained_active"
                     for pipe in ("alu", "fma", "fmaheavy", "lsu", "tensor", "xu")) + (
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__cycles_elapsed.avg.per_second",
)
#: the durations pass: every kernel of every launch (the attention and the split combine)
DURATION_METRIC = "gpu__time_duration.sum"
DURATION_METRICS = (DURATION_METRIC, "sm__cycles_elapsed.avg.per_second")   # and the SM clock it ran at
DURATION_KERNELS = "regex:paged_attention_|combine_splits"
REFERENCE = config_mod.REPO_ROOT / "results" / "h200" / "paged_kv" / "attention.csv"
SAMPLES = "Warp Stall Sampling (All Samples)"
HOTTEST = 12
# the child's module by its import name: run as ``python -m``, this module's __name__ is
# "__main__", which a child cannot import (the first H200 run of this module failed so)
CHILD_MODULE = "tma_study.studies.paged_kv.profile"


def study_config(path: Path) -> dict:
    from tma_study.studies import discover
    return config_mod.load(path, discover())["studies"]["paged_kv"]


def resolve(study: dict, keys: list[str]) -> list:
    """The sweep configurations named by ``keys``; an unknown key stops before any GPU work."""
    configs = {c.key: c for c in sweep_configs(study)}
    unknown = [k for k in keys if k not in configs]
    if unknown:
        raise SystemExit(f"unknown paged_kv configuration key(s) {unknown}: keys are SweepConfig.key of "
                         "the sweep in --config; list them with --list")
    return [configs[k] for k in keys]


def _ncu(ncu: str, config_path: Path, key: str, report: list[str]) -> list[str]:
    """ncu over this module's child for one key, the last of its LAUNCHES attention launches."""
    return [ncu, "--clock-control", "none", "--kernel-name-base", "function", "--kernel-name", KERNEL_REGEX,
            "--launch-skip", str(LAUNCHES - 1), "--launch-count", "1", *report,
            sys.executable, "-m", CHILD_MODULE, "--child", "--config", str(config_path), key]


def ncu_command(ncu: str, config_path: Path, key: str) -> list[str]:
    """The first pass: stall samples and execution counts per SASS instruction."""
    sections = [arg for name in SECTIONS for arg in ("--section", name)]
    return _ncu(ncu, config_path, key, [*sections, "--page", "source", "--print-source", "sass", "--csv"])


def ncu_pipes_command(ncu: str, config_path: Path, key: str) -> list[str]:
    """The second pass: the same launch, ``PIPE_METRICS`` only, as ncu's raw CSV page."""
    return _ncu(ncu, config_path, key, ["--metrics", ",".join(PIPE_METRICS), "--page", "raw", "--csv"])


def ncu_durations_command(ncu: str, config_path: Path, key: str) -> list[str]:
    """The durations pass: every kernel of every launch, its duration alone in nanoseconds and
    its SM clock."""
    return [ncu, "--clock-control", "none", "--kernel-name-base", "function", "--kernel-name", DURATION_KERNELS,
            "--metrics", ",".join(DURATION_METRICS), "--print-units", "base", "--page", "raw", "--csv",
            sys.executable, "-m", CHILD_MODULE, "--child", "--config", str(config_path), key]


def kernel_durations(ncu_csv: str) -> list[tuple[str, float, float]]:
    """[(kernel name, duration in us, SM clock in GHz)] in launch order, from the durations pass's
    raw CSV page."""
    names, units, values = raw_page(ncu_csv, (*DURATION_METRICS, "Kernel Name"))
    name, duration, clock = (names.index(m) for m in ("Kernel Name", *DURATION_METRICS))
    # ncu spells the unit "nsecond" or, with --print-units base (as asked here), "ns" (ncu of CUDA 13)
    scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}.get(units[duration])
    if scale is None:
        raise ValueError(f"ncu gave {DURATION_METRIC} in {units[duration]!r}, not a time unit; it is asked for "
                         "nanoseconds (--print-units base)")
    return [(row[name], _number(row[duration]) * scale, _number(row[clock]) / 1e9) for row in values]


def summarize_durations(durations: list[tuple[str, float, float]], timed: tuple[float, float] | None) -> str:
    """The last launch's kernels (its attention and, after it, any combine) with their SM clocks,
    their sum, and the reference data's (median us, mean SM clock MHz) for the whole launch when
    there is one. The difference is launch and the gap before the combine, but also any
    difference in SM clock: ncu leaves the clocks as they are, and a kernel that follows an idle
    pause may start lower than nvbench's back-to-back samples."""
    starts = [i for i, (name, _, _) in enumerate(durations) if "paged_attention_" in name]
    if not starts:
        raise ValueError("ncu profiled no paged_attention_ kernel")
    last = durations[starts[-1]:]
    total = sum(us for _, us, _ in last)
    parts = ", ".join(f"{'attention' if 'paged_attention_' in name else 'combine'} {us:.2f} us at {ghz:.2f} GHz"
                      for name, us, ghz in last)
    line = f"last launch (of {len(starts)}): {parts}; kernels together {total:.2f} us"
    if timed is not None:
        median_us, clock_mhz = timed
        line += (f"; the reference data time the whole launch at {median_us:.2f} us (median, SM clock "
                 f"{clock_mhz / 1e3:.2f} GHz mean), {median_us - total:.2f} us more")
    return line


def reference_timing(config, reference: Path) -> tuple[float, float] | None:
    """(median us, mean SM clock MHz) the reference data recorded for ``config`` (None if it has
    no such row)."""
    import pandas as pd
    if not reference.is_file():
        return None
    from .aggregate import CELL, KNOBS
    columns = config.columns()
    match = pd.read_csv(reference)
    for column in (*CELL, *KNOBS, "score_layout"):       # a configuration key's columns
        match = match[match[column] == columns[column]]
    if len(match) != 1:
        return None
    return float(match.time_us_median.iloc[0]), float(match.sm_clock_mhz_mean.iloc[0])


def pipe_shares(ncu_csv: str) -> dict[str, float]:
    """``PIPE_METRICS`` -> value, from ncu's raw CSV page of one kernel."""
    names, _, values = raw_page(ncu_csv, PIPE_METRICS)
    return {m: _number(values[0][names.index(m)]) for m in PIPE_METRICS}


def summarize_pipes(shares: dict[str, float]) -> str:
    pipes = ", ".join(f"{m.split('pipe_')[1].split('.')[0]} {shares[m]:.1f} %"
                      for m in PIPE_METRICS if "inst_executed_pipe_" in m)
    return (f"pipe issue (% of peak, active cycles): {pipes}; issue slots used "
            f"{shares['smsp__issue_active.avg.pct_of_peak_sustained_active']:.1f} %; DRAM "
            f"{shares['dram__throughput.avg.pct_of_peak_sustained_elapsed']:.1f} % of peak; SM clock "
            f"{shares['sm__cycles_elapsed.avg.per_second'] / 1e9:.2f} GHz")


def launch(study: dict, config) -> str:
    """The child: build ``config``'s kernel as measure.py does, launch it LAUNCHES times."""
    from numba import cuda
    from tma_kernels import numpy_compat  # noqa: F401  before numba compiles anything
    from tma_kernels.paged_kv.runner import AttentionRunner

    from tma_study.harness.kernel_builds import kernel_cache

    from .kernels import bounded_variants
    from .measure import TimedPools, fit_residency, resident_ctas
    variant = config.variant()
    loaded = {variant: AttentionRunner(variant, kernel_cache())}
    if config.phase.name == "decode":
        for bounded in bounded_variants(variant, study["decode_min_ctas_per_sm"]):
            with contextlib.suppress(Exception):   # ptxas refused the cap: left out, as measure does
                loaded[bounded] = AttentionRunner(bounded, kernel_cache())
        runner = fit_residency(loaded, variant, study["decode_min_ctas_per_sm"])
    else:
        runner = loaded[variant]
    split = config.split(resident_ctas(runner), cuda.get_current_device().MULTIPROCESSOR_COUNT)
    device = TimedPools().device_problem(config, split.num_splits)
    for _ in range(LAUNCHES):
        runner.launch(device, split.num_splits)
    cuda.synchronize()
    return (f"{config.key}: kernel {runner.variant.name}, {runner.kernel.get_regs_per_thread()} registers, "
            f"{resident_ctas(runner)} CTAs per SM, {split.num_splits} splits, {split.grid_ctas} CTAs")


def _durations(ncu: str, config_path: Path, config, stem: Path, reference: Path) -> str:
    result = subprocess.run(ncu_durations_command(ncu, config_path, config.key), capture_output=True, text=True,
                            check=False)
    stem.with_suffix(".durations.csv").write_text(result.stdout)
    if result.returncode != 0:
        raise SystemExit(f"ncu (durations) failed ({result.returncode}) for {config.key}: {result.stderr[-2000:]}")
    summary = summarize_durations(kernel_durations(result.stdout), reference_timing(config, reference))
    stem.with_suffix(".durations.txt").write_text(summary + "\n")
    return summary


def summarize(ncu_csv: str) -> str:
    """Stall samples by reason and by opcode, and the hottest instructions, from ncu's SASS view."""
    lines = [line for line in ncu_csv.splitlines() if line.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    start = next((i for i, row in enumerate(rows) if "Address" in row and SAMPLES in row), None)
    if start is None:
        raise ValueError(f"no SASS table with {SAMPLES!r} in ncu's output")
    head, data = rows[start], rows[start + 1:]
    col = {name: i for i, name in enumerate(head)}
    reasons = [name for name in head if name.startswith("stall_") and "Not Issued" not in name]

    def count(row, name):
        value = row[col[name]].replace(",", "")
        return int(value) if value.isdigit() else 0

    total = sum(count(row, SAMPLES) for row in data) or 1
    by_reason = collections.Counter({r: sum(count(row, r) for row in data) for r in reasons})
    by_opcode = collections.Counter()
    executed = collections.Counter()
    for row in data:
        words = row[col["Source"]].split()
        words = words[1:] if words and words[0].startswith("@") else words
        opcode = words[0].split(".")[0] if words else "?"
        by_opcode[opcode] += count(row, SAMPLES)
        executed[opcode] += count(row, "Instructions Executed")
    executed_total = sum(executed.values()) or 1
    out = [f"stall samples: {total}",
           "by reason: " + ", ".join(f"{r} {100 * n / total:.1f} %" for r, n in by_reason.most_common(6)),
           "by opcode: " + ", ".join(f"{o} {100 * n / total:.1f} %" for o, n in by_opcode.most_common(8)),
           f"executed instructions: {executed_total}; by opcode: "
           + ", ".join(f"{o} {100 * n / executed_total:.1f} %" for o, n in executed.most_common(10)),
           "hottest instructions (share of samples, executions, instruction):"]
    for row in sorted(data, key=lambda r: -count(r, SAMPLES))[:HOTTEST]:
        out.append(f"  {100 * count(row, SAMPLES) / total:5.1f} %  {count(row, 'Instructions Executed'):>9}  "
                   f"{row[col['Source']].strip()}")
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("keys", nargs="*")
    parser.add_argument("--config", type=Path, default=config_mod.REPO_ROOT / "config" / "config.yaml")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--list", action="store_true", help="print every configuration key and stop")
    parser.add_argument("--durations", action="store_true",
                        help="time each kernel of the launch (attention, split combine) instead of the stall and "
                             "pipe passes")
    parser.add_argument("--reference", type=Path, default=REFERENCE,
                        help="attention.csv whose timed median --durations prints beside the kernels' (default: %(default)s)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    study = study_config(args.config)
    if args.list:
        print("\n".join(c.key for c in sweep_configs(study)))
        return 0
    if not args.keys:
        parser.error("name at least one configuration key (--list prints them)")
    configs = resolve(study, args.keys)
    if args.child:
        for config in configs:
            print(launch(study, config), flush=True)
        return 0
    if args.out is None:
        parser.error("--out DIR is required")
    ncu = shutil.which("ncu")
    if ncu is None:
        raise SystemExit("ncu (Nsight Compute) is not on PATH; it ships with the CUDA toolkit")
    args.out.mkdir(parents=True, exist_ok=True)
    for config in configs:
        stem = args.out / config.key.replace("/", "_")
        if args.durations:
            print(f"== {config.key}\n{_durations(ncu, args.config, config, stem, args.reference)}", flush=True)
            continue
        result = subprocess.run(ncu_command(ncu, args.config, config.key), capture_output=True, text=True,
                                check=False)
        stem.with_suffix(".csv").write_text(result.stdout)
        if result.returncode != 0:
            raise SystemExit(f"ncu failed ({result.returncode}) for {config.key}: {result.stderr[-2000:]}")
        pipes = subprocess.run(ncu_pipes_command(ncu, args.config, config.key), capture_output=True, text=True,
                               check=False)
        stem.with_suffix(".pipes.csv").write_text(pipes.stdout)
        if pipes.returncode != 0:
            raise SystemExit(f"ncu (pipe metrics) failed ({pipes.returncode}) for {config.key}: "
                             f"{pipes.stderr[-2000:]}")
        summary = summarize(result.stdout) + "\n" + summarize_pipes(pipe_shares(pipes.stdout))
        stem.with_suffix(".txt").write_text(summary + "\n")
        print(f"== {config.key}\n{summary}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
