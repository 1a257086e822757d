#!/usr/bin/env bash
# The claims ship with the package: build the wheel, install it (not editable) into a fresh
# virtualenv, and from an empty directory list every claim and pass `repro check`.
# Run by .ci/run; by hand: bash tests/packaging/wheel_check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d /tmp/repro-wheel.XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 -m pip wheel . --no-deps -q -w "$work/dist"
python3 -m venv "$work/venv"
# torch is pinned in pyproject.toml to the CPU build that lies on disk.
"$work/venv/bin/pip" install -q "$work"/dist/repro-*.whl
mkdir "$work/empty"
cd "$work/empty"
unset REPRO_CLAIMS_DIR REPRO_SLURM_PROFILES
expected=$(cat "$OLDPWD"/claims/*.toml | grep -c '^\[\[claim\]\]')
listed=$("$work/venv/bin/repro" claims list --json | "$work/venv/bin/python" -c 'import json,sys; print(len(json.load(sys.stdin)))')
if [[ "$listed" != "$expected" ]]; then
    echo "wheel check: the installed wheel lists $listed claims, claims/ holds $expected" >&2
    exit 1
fi
"$work/venv/bin/repro" check > "$work/check.txt" 2>"$work/check.err" || { cat "$work/check.txt" >&2; echo "wheel check: repro check failed" >&2; exit 1; }
"$work/venv/bin/repro" submit table3 --cluster paper-p100 --dry-run --json --state-dir "$work/state" > /dev/null
echo "wheel check: the installed wheel lists all $listed claims, passes repro check ($(tail -1 "$work/check.txt")) and finds its cluster profiles"
