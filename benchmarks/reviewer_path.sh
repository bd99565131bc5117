#!/usr/bin/env bash
# The reviewer's path, timed: clone this repository fresh, then run the README's two commands
# exactly as a reviewer would (the main job from the committed data, then the test command),
# and print how long each took. Targets on a 2-core machine: main job <= 60 s, tests <= 10 min.
#
#   benchmarks/reviewer_path.sh [--skip-tests] [REPO]      (REPO: default, this checkout)
#
# The clone lives in a temporary folder, removed at the end; nothing here is touched. pip's
# download cache is used as on any machine, so the install time is a warm-cache time.
set -euo pipefail
skip_tests=false
if [[ "${1:-}" == "--skip-tests" ]]; then skip_tests=true; shift; fi
repo=$(cd "${1:-$(dirname "$0")/..}" && git rev-parse --show-toplevel)
work=$(mktemp -d "${TMPDIR:-/tmp}/reviewer-path.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
seconds() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.0f} s')" "$1" "$2"; }

git clone -q "$repo" clone && cd clone
echo "commit $(git rev-parse --short HEAD), $(nproc) cores, $(python3 --version)"

t0=$(seconds)
python3 -m venv .venv && .venv/bin/pip install -q -e . > install.log 2>&1
t1=$(seconds)
.venv/bin/snakemake -c"$(nproc)" > main_job.log 2>&1 || { tail -n 40 main_job.log; exit 1; }
t2=$(seconds)
echo "install (pip install -e .)        $(elapsed "$t0" "$t1")"
echo "main job (snakemake -c$(nproc))            $(elapsed "$t1" "$t2")   [target <= 60 s]"
echo "  $(grep -c 'Finished jobid' main_job.log) jobs; second run: $(.venv/bin/snakemake -n 2>&1 | grep -c 'Nothing to be done') 'nothing to be done'"
$skip_tests && exit 0

t3=$(seconds)
status=0
python3 -m venv .venv && .venv/bin/pip install -q -e ".[test]" > install_test.log 2>&1 \
  && .venv/bin/python -m pytest > tests.log 2>&1 || status=$?
t4=$(seconds)
echo "test command (install + pytest)   $(elapsed "$t3" "$t4")   [target <= 10 min]"
echo "  $(tail -n 1 tests.log)"
[[ $status -eq 0 ]] || sed -n '/short test summary info/,$p' tests.log
exit $status
