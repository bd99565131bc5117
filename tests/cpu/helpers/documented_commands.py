"""Every command the documentation shows a reader, and how the tests run it.

``documented()`` reads each fenced ``bash`` block of README.md, paper/README.md and docs/*.md (a
line each, backslash continuations joined) and the README checklist's generated commands.
``VERDICTS`` says, for each, how ``tests/cpu/pipeline/test_pipeline_no_gpu.py`` runs it in the
copy of the checkout where the main job ran; a documented command that no verdict matches fails
the test, so a new command gets one. The kinds:

- ``run``: as written (``.venv`` in the copy is the test's own venv), its exit code and, where the
  text says what it prints, that;
- ``dry``: as written plus ``-n`` (what it would do, checked; running it again costs minutes);
- ``gpu``: needs a Hopper GPU: Snakemake with ``-n`` must stop at the GPU check and nowhere
  before, a ``tma-study`` command must parse;
- ``slurm``: needs a SLURM cluster: its options parse and its profile names the SLURM executor;
- ``setup``: an install: the extras and constraints it names exist (the tests run in one);
- ``apt``: Debian packages: .ci/run installs the same ones;
- ``history``: at another commit: the commit is on main and holds the files the block names;
- ``self``: the test command itself (CI runs it: .ci/run).
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DOCS = [REPO / "README.md", REPO / "paper" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"```bash\n(.*?)```", re.DOTALL)
CHECKLIST_COMMAND = re.compile(r"`(\.venv/bin/snakemake -c4 results/\S+ && \.venv/bin/tma-study claims [^`]*)`")


@dataclass(frozen=True)
class Command:
    where: str          # "docs/claims.md:10"
    text: str           # exactly as written (a trailing comment included)
    block: tuple = ()   # the other commands of its fenced block (history: what runs at the commit)


@dataclass(frozen=True)
class Verdict:
    kind: str                       # run, dry, gpu, slurm, setup, apt, history, self
    pattern: str                    # re.fullmatch on the command's text
    exit_code: int = 0              # run: the exit code the text promises
    prints: tuple[str, ...] = ()    # run: what the text says it prints (stdout or stderr)
    why: str = ""                   # dry, self: why it is not run as written


def _lines(block: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", block)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def documented() -> list[Command]:
    """Every fenced bash command of the documentation, then the README checklist's commands."""
    found = []
    for path in DOCS:
        text = path.read_text()
        for match in FENCE.finditer(text):
            line = text[:match.start()].count("\n") + 2
            commands = _lines(match.group(1))
            found += [Command(f"{path.relative_to(REPO)}:{line}", c, tuple(commands)) for c in commands]
    readme = (REPO / "README.md").read_text()
    found += [Command("README.md:checklist", m.group(1)) for m in CHECKLIST_COMMAND.finditer(readme)]
    return found


STUDY = r"[a-z_]+"
VERDICTS = [
    Verdict("setup", r"python3 -m venv \.venv && \.venv/bin/pip install -e \. && \.venv/bin/snakemake -c4"),
    Verdict("self", r'python3 -m venv \.venv && \.venv/bin/pip install -e "\.\[test\]" && \.venv/bin/python -m pytest',
            why="the README's test command: the suite running this test (CI: .ci/run)"),
    Verdict("apt", r"apt-get install( [a-z0-9-]+)+"),
    Verdict("run", r"\.venv/bin/snakemake -c2 paper", prints=("paper",)),
    Verdict("run", r"\.venv/bin/snakemake -c1 figures/crossover_map\.pdf paper/tables/crossover_summary\.md",
            prints=("Nothing to be done",)),
    Verdict("run", r"\.venv/bin/snakemake --report report\.html\s+#.*", prints=("Report created",)),
    Verdict("gpu", r"\.venv/bin/snakemake -c4 --config measure=true\s+#.*"),
    Verdict("dry", r"\.venv/bin/snakemake -c4 --config reference_gpu=[a-z0-9-]+",
            why="a second main job on another run (a minute); -n shows every output under outputs/<label>/"),
    Verdict("run", r"\.venv/bin/snakemake -c4 results/h200/claims\.tsv", prints=("Nothing to be done",)),
    Verdict("run", r"cat results/h200/claims\.md", prints=("# Claims checked against",)),
    Verdict("run", r"\.venv/bin/tma-study claims --results results/h200 --study-dir catalog=build/catalog --strict.*",
            exit_code=1, prints=("claims FAIL:",)),
    Verdict("run", rf"\.venv/bin/snakemake -c4 results/h200/claims\.tsv && \.venv/bin/tma-study claims "
            rf"--results results/h200 --study {STUDY}", prints=("id\tstatus",)),
    Verdict("gpu", r"snakemake -c16 --config measure=true --resources gpu=4\s+#.*"),
    Verdict("setup", r'pip install -e "\.\[test\]"\s+#.*'),
    Verdict("slurm", r"snakemake --profile profiles/slurm( --config measure=true\s+'measure_gpus=\{[^}]*\}')?\s*(#.*)?"),
    Verdict("gpu", r"snakemake -c4 --config measure=true run_studies=crossover,dsm"),
    Verdict("run", r"snakemake -n --config 'studies=\{crossover: \{stages: \[4\]\}\}'"),
    Verdict("run", r"tma-study check-config config/smoke\.yaml\s+#.*", prints=("valid:",)),
    Verdict("setup", r'python3\.12 -m venv \.venv && \.venv/bin/pip install -c constraints/h200-reference\.txt '
            r'-e "\.\[test,measure\]"'),
    Verdict("dry", r"\.venv/bin/snakemake -c16 build/compile/gemm/resources\.csv",
            why="58 CUTLASS variants, about 25 minutes of nvcc on 2 cores (docs/kernel_cache.md)"),
    Verdict("gpu", r"\.venv/bin/tma-study measure gemm --config config/smoke\.yaml --out \S+\s+#.*"),
    Verdict("history", r"git checkout [0-9a-f]{7,40}"),
    Verdict("history", r'python3 -m venv \.venv && \.venv/bin/pip install -e "\.\[test,measure\]"'),
    Verdict("history", r"\.venv/bin/tma-study measure paged_kv --config config/probes/\S+ --out \S+\s+#.*"),
    Verdict("history", r"\.venv/bin/python -m pytest( tests/cpu/\S+)+"),
    Verdict("run", r"\.venv/bin/tma-study advise --level hbm --shape gather .*", prints=("load it with:",)),
    Verdict("run", r"\.venv/bin/tma-study advise --level l2 --shape box .* --json", prints=('"operand": {',)),
    Verdict("run", r"\.venv/bin/tma-study advisor-validate --results results/[a-z0-9-]+ --out \S+"),
    Verdict("run", r"\.venv/bin/tma-study check-provenance results/h200/\*/provenance\.json", prints=(": valid;",)),
    Verdict("run", r"\.venv/bin/snakemake -c2 && \.venv/bin/python tests/cpu/helpers/outputs_manifest\.py --write",
            prints=("outputs.sha256",)),
    Verdict("run", r"\.venv/bin/snakemake -c2 paper && \.venv/bin/tma-study release --out build/release",
            prints=(".tar.gz:",)),
]


def distinct(commands: list[Command]) -> list[Command]:
    """One of each command text (the same line in two documents is run once), naming every place."""
    places: dict[str, list[Command]] = {}
    for command in commands:
        places.setdefault(command.text, []).append(command)
    return [Command(", ".join(c.where for c in same), same[0].text, same[0].block) for same in places.values()]


def verdict(command: Command) -> Verdict | None:
    """The one verdict whose pattern matches the command (None: it has none yet)."""
    matching = [v for v in VERDICTS if re.fullmatch(v.pattern, command.text)]
    return matching[0] if len(matching) == 1 else None


def program_arguments(text: str) -> list[str]:
    """The arguments after the program of a one-program command line, its comment dropped."""
    return shlex.split(text, comments=True)[1:]


def history_files(command: Command) -> list[str]:
    """The repository files a command of a history block names (configs, tests)."""
    return [word for word in shlex.split(command.text, comments=True)
            if re.fullmatch(r"(config|tests)/[\w/.-]+\.(yaml|py)", word)]
