"""The timeline of a Snakemake run, read from its log: when each job started and finished, and
what the GPU of a measure run did (first job, busy time, idle gaps).

    python benchmarks/run_timeline.py [LOG] [--csv JOBS.csv]

LOG: a Snakemake log (default: the newest .snakemake/log/*.snakemake.log here). Snakemake
stamps its log to the second, so each time is good to about a second.
"""
from __future__ import annotations

import argparse
import csv
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

STAMP = re.compile(r"^\[(\w{3} \w{3}\s+\d+ \d\d:\d\d:\d\d \d{4})\]$")
HEADER_DATE = re.compile(r"^\s+Date: (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)$")
JOB_START = re.compile(r"^(?:local)?(?:rule|checkpoint) (\S+):$")
JOB_ID = re.compile(r"^\s+jobid: (\d+)$")
WILDCARDS = re.compile(r"^\s+wildcards: (.*)$")
JOB_END = re.compile(r"^Finished jobid: (\d+) \(Rule: (\S+)\)$")
GPU_RULES = ("measure",)          # the rules that hold a GPU


@dataclass
class Job:
    rule: str
    started: datetime
    jobid: int | None = None
    wildcards: str = ""
    finished: datetime | None = None

    @property
    def seconds(self) -> float | None:
        return (self.finished - self.started).total_seconds() if self.finished else None


@dataclass
class Run:
    began: datetime | None
    jobs: list[Job] = field(default_factory=list)


def parse(lines) -> Run:
    """The jobs of a Snakemake log, with their start and finish times."""
    run, now, pending, by_id = Run(None), None, None, {}
    for line in lines:
        line = line.rstrip("\n")
        if (m := HEADER_DATE.match(line)) and run.began is None:
            run.began = datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S")
        elif m := STAMP.match(line):
            now = datetime.strptime(" ".join(m[1].split()), "%a %b %d %H:%M:%S %Y")
        elif (m := JOB_START.match(line)) and now is not None:
            pending = Job(m[1], now)
            run.jobs.append(pending)
        elif pending is not None and (m := JOB_ID.match(line)):
            pending.jobid = int(m[1])
            by_id[pending.jobid] = pending
        elif pending is not None and (m := WILDCARDS.match(line)):
            pending.wildcards = m[1]
        elif m := JOB_END.match(line):
            if (job := by_id.get(int(m[1]))) is not None:
                job.finished = now
    return run


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:4.1f} s"


def summary(run: Run) -> list[str]:
    """What took how long: the whole run, each compile and measure job, the GPU's idle time."""
    done = [j for j in run.jobs if j.finished]
    if not done:
        return ["no finished job in the log"]
    began = run.began or min(j.started for j in done)
    ended = max(j.finished for j in done)
    out = [f"whole run: {_minutes((ended - began).total_seconds())} "
           f"({len(done)} jobs finished, {len(run.jobs) - len(done)} not)"]
    for rule in ("compile", *GPU_RULES):
        for job in sorted((j for j in done if j.rule == rule), key=lambda j: j.started):
            start = (job.started - began).total_seconds()
            out.append(f"  {rule:8s} {job.wildcards:45s} from {_minutes(start)}  took {_minutes(job.seconds)}")
    out.append("  by rule (jobs, from the first start to the last end, the sum of the jobs' times):")
    for rule in sorted({j.rule for j in done}, key=lambda r: min(j.started for j in done if j.rule == r)):
        jobs = [j for j in done if j.rule == rule]
        first, last = min(j.started for j in jobs), max(j.finished for j in jobs)
        out.append(f"    {rule:28s} {len(jobs):4d}  {_minutes((first - began).total_seconds())} .. "
                   f"{_minutes((last - began).total_seconds())}  sum {_minutes(sum(j.seconds for j in jobs))}")
    gpu = sorted((j for j in done if j.rule in GPU_RULES), key=lambda j: j.started)
    if gpu:
        busy, gaps, reach = 0.0, [], gpu[0].started
        for job in gpu:
            if job.started > reach:
                gaps.append((job.started - reach).total_seconds())
            busy += max(0.0, (job.finished - max(job.started, reach)).total_seconds())
            reach = max(reach, job.finished)
        out.append(f"GPU: first measure job at {_minutes((gpu[0].started - began).total_seconds())}, "
                   f"busy {_minutes(busy)}, idle between jobs {_minutes(sum(gaps))}, "
                   f"after the last one {_minutes((ended - reach).total_seconds())}")
    return out


def write_csv(run: Run, path: Path) -> None:
    began = run.began or min(j.started for j in run.jobs)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["jobid", "rule", "wildcards", "start_s", "end_s", "seconds"])
        for job in run.jobs:
            writer.writerow([job.jobid, job.rule, job.wildcards, (job.started - began).total_seconds(),
                             (job.finished - began).total_seconds() if job.finished else "", job.seconds or ""])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", nargs="?", type=Path)
    parser.add_argument("--csv", type=Path, help="write every job's start, end and seconds here")
    args = parser.parse_args(argv)
    log = args.log or max(Path(".snakemake/log").glob("*.snakemake.log"), default=None)
    if log is None or not log.is_file():
        print(f"run_timeline: no Snakemake log at {log or '.snakemake/log/'}", file=sys.stderr)
        return 2
    run = parse(log.read_text().splitlines())
    print(f"{log}:")
    print("\n".join(summary(run)))
    if args.csv:
        write_csv(run, args.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
