#!/usr/bin/env bash
# The README's test command, timed on a fresh clone: clone this repository, make its venv as the
# README does (pip install -e ".[test]", timed apart), then run `.venv/bin/python -m pytest`
# exactly, with --durations added. Prints the wall time, the CPU time (user + sys of pytest and
# every process it waited for: workers, Snakemake, its jobs, nvcc), the machine's load average
# before and after (other users' work on a shared machine slows the wall time, not the CPU
# time) and the slowest tests. Target on a 2-core machine: <= 6 min.
#
#   benchmarks/test_clock.sh [--record] [--extra ARGS] [REPO]      (REPO: default, this checkout)
#
# --record writes the report to benchmarks/runs/test-clock-<UTC date>-<cores>cores-<commit>.txt in
# REPO. --extra passes further pytest arguments (CI's second command: --extra "-m exhaustive
# --dist load"). The clone lives in a temporary folder, removed at the end.
set -euo pipefail
record=false
extra=()
while [[ "${1:-}" == --* ]]; do
  case "$1" in
    --record) record=true ;;
    --extra) shift; read -r -a extra <<< "$1" ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
repo=$(cd "${1:-$(dirname "$0")/..}" && git rev-parse --show-toplevel)
work=$(mktemp -d "${TMPDIR:-/tmp}/test-clock.XXXXXX")
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"    # the read-only-checkout test runs Snakemake from this venv as another user
cd "$work"
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || echo unknown)
load() { cut -d' ' -f1-3 /proc/loadavg; }

git clone -q "$repo" clone && cd clone
commit=$(git rev-parse --short HEAD)
t0=$(date +%s)
python3 -m venv .venv && .venv/bin/pip install -q -e ".[test]" > install.log 2>&1
install_s=$(( $(date +%s) - t0 ))

load_before=$(load)
status=0
/usr/bin/time -f "%e %U %S" -o time.txt .venv/bin/python -m pytest --durations=15 "${extra[@]}" > tests.log 2>&1 \
  || status=$?
load_after=$(load)
read -r wall user sys < <(tail -n 1 time.txt)     # after "Command exited with non-zero status"
report=$(cat <<REPORT
# benchmarks/test_clock.sh on a fresh clone: .venv/bin/python -m pytest ${extra[*]}
machine: $(nproc) cores, ${cpu}
commit: ${commit}
python: $(python3 --version)
date_utc: $(date -u +%FT%H:%MZ)
install_s: ${install_s}
load_average_before: ${load_before}
load_average_after: ${load_after}
test_wall_s: ${wall%.*}
test_cpu_s: $(python3 -c "print(round($user + $sys))") (user ${user%.*}, sys ${sys%.*})
test_result: $(tail -n 1 tests.log | tr -d '=' | sed 's/^ *//;s/ *$//')
slowest:
$(sed -n '/slowest 15 durations/,/^=\+ .*\(passed\|failed\|short test summary\)/p' tests.log | sed '1d;$d' | grep -v '^$' || true)
REPORT
)
echo "$report"
[[ $status -eq 0 ]] || sed -n '/short test summary info/,$p' tests.log
if $record; then
  out="$repo/benchmarks/runs/test-clock-$(date -u +%F)-$(nproc)cores-${commit}.txt"
  echo "$report" > "$out"
  echo "recorded in $out"
fi
exit $status
