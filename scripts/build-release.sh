#!/usr/bin/env bash
# ./dev build: the release files of runjob-core and its five plugins, built and checked like the code.
#   1. a wheel and an sdist of each (python -m build) into $RUNJOB_DIST (default dist/)
#   2. twine check --strict, and scripts/check_dist.py (one version everywhere, the pins, the package data)
#   3. a fresh virtual environment that gets runjob from those files alone (dependencies from the index),
#      then: runjob --version, runjob plugins (all five, no load error), runjob init + the local demo job,
#      and the plugin guide's example backend, installed against those files, run against the kit.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${RUNJOB_VENV:-.venv}/bin/python
OUT=$(realpath -m "${RUNJOB_DIST:-dist}")
log() { printf '[build] %s\n' "$*" >&2; }

"$PY" -m pip install -q build twine 2>&1 | grep -v '^WARNING: Location' || true
rm -rf "$OUT" && mkdir -p "$OUT"
for project in . plugins/local plugins/slurm plugins/runpod plugins/health plugins/hub; do
  log "building $project"
  "$PY" -m build --no-isolation --sdist --wheel --outdir "$OUT" "$project" >"$OUT/.build.log" 2>&1 \
    || { cat "$OUT/.build.log" >&2; exit 1; }
done
rm -f "$OUT/.build.log"
"$PY" -m twine check --strict "$OUT"/*
"$PY" scripts/check_dist.py "$OUT"

version=$("$PY" -c 'import runpy; print(runpy.run_path("runjob_core/_version.py")["__version__"])')
fresh=$(mktemp -d /tmp/runjob-release-XXXXXX)
trap 'rm -rf "$fresh"' EXIT
log "installing runjob-core[all]==$version into a fresh environment ($fresh)"
"$("$PY" -c 'import sys; print(sys.base_prefix)')/bin/python3" -m venv "$fresh/venv"
pip=("$fresh/venv/bin/python" -m pip install -q)
# runjob's own distributions from the built files alone; their dependencies from the index.
"${pip[@]}" --find-links "$OUT" "runjob-core[all]==$version" 2>&1 | grep -v '^WARNING: Location' || true
"${pip[@]}" --no-index --no-deps --force-reinstall --find-links "$OUT" "runjob-core==$version" \
  runjob-{local,slurm,runpod,health,hub}"==$version"
mkdir "$fresh/demo" && cd "$fresh/demo"
export RUNJOB_WARM=0 XDG_CACHE_HOME="$fresh/cache"
test "$("$fresh/venv/bin/runjob" --version)" = "runjob $version"
"$fresh/venv/bin/runjob" plugins --json | "$fresh/venv/bin/python" -c '
import json, sys
found = {p["name"]: p for p in json.load(sys.stdin)}
missing = {"local", "slurm", "runpod", "health", "hub"} - set(found)
broken = [p["name"] + ": " + p["error"] for p in found.values() if p.get("error")]
assert not missing and not broken, (missing, broken)
print("[build] runjob plugins: " + ", ".join(sorted(found)) + ": no load error", file=sys.stderr)'
"$fresh/venv/bin/runjob" init >/dev/null
"$fresh/venv/bin/runjob" run examples/hello.yaml --yes >/dev/null
# The native client from the wheel's own client.c, over the console script, then the same commands.
if command -v cc >/dev/null; then
  "$fresh/venv/bin/python" -m runjob_core.warm.native install >/dev/null
  "$fresh/venv/bin/python" -m runjob_core.warm.native status | grep -q "native client" || { log "the native client was not installed"; exit 1; }
  test "$("$fresh/venv/bin/runjob" --version)" = "runjob $version"
  RUNJOB_WARM=1 "$fresh/venv/bin/runjob" status >/dev/null
  RUNJOB_WARM=1 "$fresh/venv/bin/runjob" status >/dev/null
  log "the native client: installed from the wheel's client.c, runjob --version and status through it"
fi
# The plugin guide's example backend, packaged as its reader would, installed against these wheels
# (its runjob-core~= pin resolved by the built core) and run against the kit.
cd - >/dev/null
"$PY" -c 'import sys; sys.path.insert(0, "tests"); import test_plugin_guide as g; g.write_example_package(__import__("pathlib").Path(sys.argv[1]))' \
  "$fresh/runjob-shell"
"${pip[@]}" pytest "setuptools>=68" 2>&1 | grep -v '^WARNING: Location' || true
"${pip[@]}" --no-index --no-build-isolation --find-links "$OUT" "$fresh/runjob-shell"
(cd "$fresh/runjob-shell" && "$fresh/venv/bin/python" -m pytest -q -p no:cacheprovider tests >"$fresh/kit.log" 2>&1) \
  || { tail -30 "$fresh/kit.log" >&2; log "the guide's example backend failed the kit against the built wheels"; exit 1; }
log "the guide's example backend: $(tail -1 "$fresh/kit.log")"
log "OK: $(ls "$OUT" | wc -l) files in $OUT, installed from them alone, demo job and the guide's backend passed"
