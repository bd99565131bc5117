"""One sha256 of the SASS per kernel build that the studies sweep, to show a refactor of kernels/
changes no measured kernel.

Every study with a numba compile list (``Study.kernels``: paged_kv, paged_kv_tma, crossover,
multicast, dsm, cluster_launch) is asked for its builds under the committed config, exactly as
the compile step asks (``tma_study.harness.kernel_builds``); each build is compiled for sm_90a
on the CPU (numba -> PTX -> ptxas -> nvdisasm, ``tma_kernels.build``, through a kernel cache of
its own) and its SASS text hashed, the kernel's mangled symbol masked (``sass_digest``). The gemm studies (nvcc, CUTLASS) and heldout (Triton) do not
build through kernels/build.py and are not covered.

    python benchmarks/sass_digests.py --out before.txt                  # every build (slow: ~10 s each)
    python benchmarks/sass_digests.py --studies paged_kv --every 7 --out part.txt
    python benchmarks/sass_digests.py --match _kqwrl --out part.txt --compare before.txt
    python benchmarks/sass_digests.py --only before.txt --spread --out after.txt --compare before.txt

Output: one line per build, ``study<TAB>build<TAB>sha256`` (``refused`` where ptxas refused a
build that may be refused), sorted. ``--compare`` prints the builds whose digest differs from
an earlier file's and exits 1 if any does.
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import re
import sys
import time
from pathlib import Path

REFUSED = "refused"
#: numba's mangled symbol of a kernel carries a per-process counter (``...B4v188B...``: the
#: function's uid, which depends on what the process compiled first), so it is masked
_MANGLED = re.compile(r"_ZN[0-9A-Za-z_]+")


def sass_digest(sass: str) -> str:
    """sha256 of the SASS text with the kernel's mangled symbol masked."""
    return hashlib.sha256(_MANGLED.sub("KERNEL", sass).encode()).hexdigest()


@functools.cache
def _builds(study_name: str) -> list:
    from tma_study import config as config_mod
    from tma_study.studies import discover
    studies = discover()
    config = config_mod.load(config_mod.REPO_ROOT / "config" / "config.yaml", studies)
    return studies[study_name].entry("kernels")(config["studies"][study_name])


def numba_studies() -> list[str]:
    from tma_study.studies import discover
    return sorted(name for name, study in discover().items() if study.kernels)


def digest_one(study_name: str, index: int, cache_dir: str) -> tuple[str, str, str]:
    """(study, build name, sha256 of its SASS or ``refused``), compiled in this process."""
    from tma_kernels.build import CudaToolError
    from tma_kernels.cache import KernelCache
    build = _builds(study_name)[index]
    try:
        compiled = KernelCache(Path(cache_dir)).compile(build.name, build.function, build.signature)
    except CudaToolError:
        if not build.may_be_refused:
            raise
        return study_name, build.name, REFUSED
    return study_name, build.name, sass_digest(compiled.sass)


def selected(studies, every: int, match: str | None, only: set | None = None) -> list[tuple[str, int]]:
    """(study, index) of the builds chosen: every ``every``-th of each study, names matching (and,
    given ``only``, named there)."""
    chosen = []
    for study_name in studies:
        for index, build in enumerate(_builds(study_name)):
            if index % every == 0 and (match is None or re.search(match, build.name)) \
                    and (only is None or build.name in only):
                chosen.append((study_name, index))
    return chosen


def spread(chosen: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The builds in a fixed order that mixes kernels and layouts, so a run cut short has compared
    some of each (by a hash of the name, not the sweep's sorted order)."""
    return sorted(chosen, key=lambda c: hashlib.sha256(_builds(c[0])[c[1]].name.encode()).hexdigest())


def read_digests(path: Path) -> dict[tuple[str, str], str]:
    rows = (line.split("\t") for line in path.read_text().splitlines() if line and not line.startswith("#"))
    return {(study, name): digest for study, name, digest in rows}


def compare(found: dict, earlier: dict) -> int:
    """Print the comparison with ``earlier``; the number of builds whose digest differs."""
    common = sorted(set(found) & set(earlier))
    differ = [key for key in common if found[key] != earlier[key]]
    for study, name in differ:
        print(f"DIFFERENT {study} {name}: {earlier[(study, name)][:12]} -> {found[(study, name)][:12]}")
    print(f"compared {len(common)} builds: {len(common) - len(differ)} identical, {len(differ)} different"
          f" ({len(set(found) - set(earlier))} not in the earlier file)")
    return len(differ)


def main(argv=None) -> int:
    from tma_study.harness.parallel_compile import process_map
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--studies", nargs="*", help="default: every study with a numba compile list")
    parser.add_argument("--every", type=int, default=1, help="only every N-th build of each study")
    parser.add_argument("--match", help="only builds whose name matches this regular expression")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--cache", default="build/sass-digest-cache", help="the kernel cache to compile into")
    parser.add_argument("--compare", type=Path, help="an earlier output to compare with")
    parser.add_argument("--only", type=Path, help="only the builds named in this file (a name a line, or an output)")
    parser.add_argument("--spread", action="store_true", help="compile in an order that mixes the kernels")
    args = parser.parse_args(argv)
    only = None if args.only is None else {line.split("\t")[-2] if "\t" in line else line.strip()
                                           for line in args.only.read_text().splitlines() if line.strip()}
    chosen = selected(args.studies or numba_studies(), args.every, args.match, only)
    chosen = spread(chosen) if args.spread else chosen
    started = time.monotonic()
    found = {}
    for done, (study, name, digest) in enumerate(process_map(
            digest_one, *zip(*chosen), [args.cache] * len(chosen), workers=args.workers), 1):
        found[(study, name)] = digest
        print(f"[{done}/{len(chosen)} {time.monotonic() - started:.0f} s] {study} {name} {digest[:12]}", flush=True)
    lines = [f"{study}\t{name}\t{digest}" for (study, name), digest in sorted(found.items())]
    args.out.write_text("\n".join(lines) + "\n")
    print(f"{len(found)} builds in {time.monotonic() - started:.0f} s -> {args.out}")
    return 1 if args.compare and compare(found, read_digests(args.compare)) else 0


if __name__ == "__main__":
    sys.exit(main())
