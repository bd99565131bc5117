#!/usr/bin/env bash
# The main job on a fresh clone, timed in wall-clock and CPU seconds (a shared machine's load
# stretches wall time; CPU time, user + sys of Snakemake and every job, much less), with an
# existing venv instead of a fresh install (reviewer_path.sh times the install too).
#
#   benchmarks/main_job.sh [--record] [--venv DIR] [REPO]     (REPO: default, this checkout)
#
# --venv: the venv whose snakemake runs (default: REPO/.venv). --record writes the result to
# benchmarks/runs/main-job-<UTC date>-<cores>cores.txt in REPO, with the machine's load average
# before and after. The outputs are compared with tests/cpu/pipeline/outputs.sha256. The clone lives in a temporary folder, removed at the end.
# A venv with the test extra has snakemake-executor-plugin-slurm, whose import runs `scontrol
# show config` (up to 10 s where a SLURM client is installed without a controller); the main
# job's own install (pip install -e .) lacks it. TMA_NO_SCONTROL=1 hides scontrol for the run.
set -euo pipefail
record=false
venv=""
while [[ "${1:-}" == --* ]]; do
  case "$1" in
    --record) record=true ;;
    --venv) venv="$2"; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
repo=$(cd "${1:-$(dirname "$0")/..}" && git rev-parse --show-toplevel)
venv=$(cd "${venv:-$repo/.venv}" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/main-job.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [[ "${TMA_NO_SCONTROL:-}" == 1 ]]; then
  mkdir "$work/bin" && printf '#!/bin/sh\nexit 1\n' > "$work/bin/scontrol" && chmod +x "$work/bin/scontrol"
  export PATH="$work/bin:$PATH"
fi
git clone -q "$repo" "$work/clone" && cd "$work/clone"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
env -u PYTHONPATH /usr/bin/time -o time.txt -f "%e %U %S" "$venv/bin/snakemake" -c"$(nproc)" > main_job.log 2>&1 \
  || { tail -n 40 main_job.log; exit 1; }
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
read -r wall user sys < time.txt
jobs=$(grep -c 'Finished jobid' main_job.log || true)
outputs=$(env -u PYTHONPATH "$venv/bin/python" tests/cpu/helpers/outputs_manifest.py --root . 2>&1 | tail -n 1)
cpu=$(python3 -c "import sys; print(f'{float(sys.argv[1]) + float(sys.argv[2]):.1f}')" "$user" "$sys")
lines=("# benchmarks/main_job.sh on a fresh clone (venv $venv)"
       "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
       "load_average_before: $load_before"
       "load_average_after: $load_after"
       "date_utc: $(date -u +%F)"
       "commit: $(git rev-parse --short HEAD)"
       "main_job_wall_s: $wall"
       "main_job_cpu_s: $cpu (user $user, sys $sys; Snakemake and its jobs)"
       "main_job_jobs: $jobs"
       "outputs: $outputs"
       "scontrol_hidden: ${TMA_NO_SCONTROL:-0}")
printf '%s\n' "${lines[@]}"
if $record; then
  out="$repo/benchmarks/runs/main-job-$(date -u +%F)-$(nproc)cores.txt"
  printf '%s\n' "${lines[@]}" >> "$out"
  echo "recorded in $out"
fi
