#!/usr/bin/env bash
# The reviewer's path, timed: clone this repository fresh, then run the README's two commands
# exactly as a reviewer would (the main job from the committed data, then the test command),
# and print how long each took. Targets on a 2-core machine: main job <= 40 s, tests <= 6 min.
#
#   benchmarks/reviewer_path.sh [--skip-tests] [--record] [REPO]      (REPO: default, this checkout)
#
# --record also writes the times to benchmarks/runs/reviewer-path-<UTC date>-<cores>cores.txt in
# REPO, which `tma-study readme-tables` turns into the README's time table (the machine named:
# cores, CPU model, and the load average at the start, as other users' work slows a shared one).
# The clone lives in a temporary folder, removed at the end; nothing else is touched. pip's
# download cache is used as on any machine, so the install time is a warm-cache time.
set -euo pipefail
skip_tests=false
record=false
while [[ "${1:-}" == --* ]]; do
  case "$1" in
    --skip-tests) skip_tests=true ;;
    --record) record=true ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
repo=$(cd "${1:-$(dirname "$0")/..}" && git rev-parse --show-toplevel)
work=$(mktemp -d "${TMPDIR:-/tmp}/reviewer-path.XXXXXX")
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"    # the read-only-checkout test runs Snakemake from this venv as another user
cd "$work"
seconds() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.0f}')" "$1" "$2"; }
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || echo unknown)
record_lines=("machine: $(nproc) cores, ${cpu:-unknown CPU}, load average $(cut -d' ' -f1 /proc/loadavg) at the start"
              "date_utc: $(date -u +%F)")

git clone -q "$repo" clone && cd clone
echo "commit $(git rev-parse --short HEAD), $(nproc) cores (${cpu}), load average $(cut -d' ' -f1 /proc/loadavg), $(python3 --version)"
record_lines+=("commit: $(git rev-parse --short HEAD)" "python: $(python3 --version)")

t0=$(seconds)
python3 -m venv .venv && .venv/bin/pip install -q -e . > install.log 2>&1
t1=$(seconds)
.venv/bin/snakemake -c"$(nproc)" > main_job.log 2>&1 || { tail -n 40 main_job.log; exit 1; }
t2=$(seconds)
jobs=$(grep -c 'Finished jobid' main_job.log || true)
echo "install (pip install -e .)        $(elapsed "$t0" "$t1") s"
echo "main job (snakemake -c$(nproc))            $(elapsed "$t1" "$t2") s   [target <= 40 s]"
echo "  $jobs jobs; second run: $(.venv/bin/snakemake -n 2>&1 | grep -c 'Nothing to be done') 'nothing to be done'"
record_lines+=("install_s: $(elapsed "$t0" "$t1")" "main_job_s: $(elapsed "$t1" "$t2")" "main_job_jobs: $jobs")

status=0
if ! $skip_tests; then
  t3=$(seconds)
  python3 -m venv .venv && .venv/bin/pip install -q -e ".[test]" > install_test.log 2>&1 \
    && .venv/bin/python -m pytest > tests.log 2>&1 || status=$?
  t4=$(seconds)
  echo "test command (install + pytest)   $(elapsed "$t3" "$t4") s   [target <= 6 min]"
  echo "  $(tail -n 1 tests.log)"
  record_lines+=("test_command_s: $(elapsed "$t3" "$t4")" "test_result: $(tail -n 1 tests.log | tr -d '=' | sed 's/^ *//;s/ *$//')")
  [[ $status -eq 0 ]] || sed -n '/short test summary info/,$p' tests.log
fi
if $record; then
  out="$repo/benchmarks/runs/reviewer-path-$(date -u +%F)-$(nproc)cores.txt"
  printf '%s\n' "# benchmarks/reviewer_path.sh$($skip_tests && echo ' --skip-tests') on a fresh clone" \
    "${record_lines[@]}" > "$out"
  echo "recorded in $out"
fi
exit $status
