#!/usr/bin/env bash
# Every study measured on this GPU, compile included, from an empty kernel cache, timed.
# Target: <= 20 min on one H200 with 16 cores. Copies this checkout (without build/, logs/ and
# Snakemake's state) to a temporary folder, runs the README's measure command there on every
# core, and prints the run's timeline from Snakemake's log (benchmarks/run_timeline.py).
#
#   benchmarks/gpu_reproduction.sh [--keep DIR] [--label NAME] [-- SNAKEMAKE_ARGS...]
#
# --keep DIR: copy the new results/<label>/ folder(s), the logs and the timeline to DIR.
# --label NAME: measure into results/NAME/ (config results_label; default: the pipeline's rule,
# <slug>-<UTC date> on the reference GPU). Give one when results/<that default>/ is already in
# the checkout: the copy has no git history, so a dated folder there would be taken for one this
# machine measured earlier today and be written over in the copy.
# PYTHON: the interpreter with the project and its measure extra (default: .venv/bin/python,
# else python3). Needs a Hopper GPU; nothing in this checkout is touched.
set -euo pipefail
keep=""
config=(measure=true)
while [[ $# -gt 0 ]]; do
    case "$1" in
        --keep) keep=$(realpath -m "$2"); shift 2 ;;
        --label) config+=("results_label=$2"); shift 2 ;;
        --) shift; break ;;
        *) echo "unknown option $1 (--keep DIR, --label NAME, -- SNAKEMAKE_ARGS)" >&2; exit 2 ;;
    esac
done
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$repo/.venv/bin/python}
[[ -x "$python" ]] || python=python3
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-reproduction.XXXXXX")
trap 'rm -rf "$work"' EXIT

tar -C "$repo" --exclude=./build --exclude=./logs --exclude=./.snakemake --exclude=./.venv \
    --exclude=./.git --exclude='*/__pycache__' -cf - . | tar -C "$work" -xf -
ls "$work/results" > "$work/.results_before"
cd "$work"
echo "$(nproc) cores, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1), $("$python" --version)"

start=$(date +%s)
status=0
"$python" -m snakemake -c"$(nproc)" "$@" --config "${config[@]}" > snakemake.log 2>&1 || status=$?
echo "snakemake --config ${config[*]}: exit $status after $(( $(date +%s) - start )) s   [target <= 1200 s]"
log=$(ls -t .snakemake/log/*.snakemake.log | head -n 1)
"$python" "$repo/benchmarks/run_timeline.py" "$log" --csv timeline.csv
[[ $status -eq 0 ]] || tail -n 40 snakemake.log

if [[ -n "$keep" ]]; then
    mkdir -p "$keep/results"
    for label in $(ls results | grep -vxF -f .results_before); do cp -a "results/$label" "$keep/results/"; done
    cp -a logs snakemake.log timeline.csv "$log" "$keep/"
    echo "kept in $keep: results/$(ls "$keep/results" | tr '\n' ' ') logs, timeline.csv"
fi
exit $status
