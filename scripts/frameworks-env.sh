#!/usr/bin/env bash
# Print the path of the cached virtual environment holding the real-framework tier's pinned
# frameworks (tests/frameworks/requirements.txt), creating it first when missing.
# It lives outside the checkout, keyed by the pins' hash, so one machine installs it once:
# every checkout, CI run and later session reuses it. RUNJOB_FRAMEWORKS_VENV overrides the path.
set -euo pipefail
cd "$(dirname "$0")/.."
REQS=tests/frameworks/requirements.txt
# The system Python, not a user's pyenv/conda one: the test cluster runs jobs as another user,
# who must be able to execute the environment's interpreter (root's home is closed to it).
PY=${RUNJOB_FRAMEWORKS_PYTHON:-/usr/bin/python3}
key=$( { cat "$REQS"; "$PY" --version; } | sha256sum | cut -c1-12)
VENV=${RUNJOB_FRAMEWORKS_VENV:-/var/cache/runjob/frameworks-$key}
STAMP="$VENV/.runjob-complete"
if [ -f "$STAMP" ]; then echo "$VENV"; exit 0; fi
# Build beside the final path and rename at the end: a half-built environment (an install
# cut short) is never taken for a whole one, and two builders do not mix their files.
mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9
if [ -f "$STAMP" ]; then echo "$VENV"; exit 0; fi
tmp="$VENV.building"
rm -rf "$tmp"
printf '[dev] installing the pinned frameworks into %s (once per machine)\n' "$VENV" >&2
"$PY" -m venv "$tmp"
"$tmp/bin/python" -m pip install -q -r "$REQS" 2>&1 | grep -v -e '^WARNING: Location' -e 'is ignored: it is neither' >&2 || true
"$tmp/bin/python" -c 'import torch, transformers, accelerate, datasets, lm_eval' \
  || { printf '[dev] the frameworks environment failed to install\n' >&2; exit 1; }
rm -rf "$VENV"
mv "$tmp" "$VENV"
# venv writes its own path into bin/ scripts: point them at the final path.
grep -rlI --exclude-dir=__pycache__ "$tmp" "$VENV/bin" | xargs -r sed -i "s#$tmp#$VENV#g"
sed -i "s#$tmp#$VENV#g" "$VENV/pyvenv.cfg"
chmod -R a+rX "$VENV"
touch "$STAMP"
echo "$VENV"
