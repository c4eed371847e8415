#!/usr/bin/env bash
# Issue 33 on a real GPU machine: a short real training job through `cluster: local` with GPU
# telemetry, a second 1-GPU job that must wait in the local GPU queue and start after it, and a
# job asking for 2 GPUs that pre-flight must refuse. Prints and copies into $OUT:
#   status.json, report-train.json, report-queued.json, events.txt, refused.txt, telemetry-head.csv,
#   clusters-check.txt, train.log, summary.txt
# Usage, from the repo root with runjob importable (PYTHONPATH): bash bench/device/gpu_local_check.sh
# Env: OUT (default ./gpu-check-out), PYTHON (default python3), BUSY_S/IDLE_S (the job's phases),
# SAMPLE_S (health.gpu_sample_seconds, default 1), IDLE_MIN (health.gpu_idle_minutes, default 0.25).
# Where nvidia-smi is missing (CI), put runjob_core/testing/nvidia_smi.py's stand-in on PATH first.
set -uo pipefail
repo=$(pwd)
out=${OUT:-$repo/gpu-check-out}
py=${PYTHON:-python3}
py=$(command -v "$py")
mkdir -p "$out"
work=$(mktemp -d /tmp/runjob-gpu-check.XXXXXX)
started=$(date +%s)

# runjob finds backends through entry points. Importable from a source tree (PYTHONPATH) but not
# installed, the local backend has no distribution metadata: describe it in a throw-away dist-info.
if ! "$py" -c 'import importlib.metadata as m, sys; sys.exit(0 if any(e.name == "local" for e in m.entry_points(group="runjob")) else 1)'; then
  meta="$work/site/runjob_local-0.0.dev0.dist-info"
  mkdir -p "$meta"
  printf 'Metadata-Version: 2.1\nName: runjob-local\nVersion: 0.0.dev0\n' > "$meta/METADATA"
  printf '[runjob]\nlocal = runjob_local\n' > "$meta/entry_points.txt"
  export PYTHONPATH="$work/site:$repo:$repo/plugins/local/src${PYTHONPATH:+:$PYTHONPATH}"
fi
export XDG_CACHE_HOME="$work/cache" XDG_CONFIG_HOME="$work/config" COLUMNS=160
unset RUNJOB_HOME RUNJOB_CLUSTERS
runjob() { "$py" -m runjob_core "$@"; }

project="$work/project"
mkdir -p "$project/.runjob"
cp "$repo/bench/device/gpu_local_train.py" "$project/train.py"
cd "$project" || exit 1
cat > .runjob/clusters.yaml <<EOF
clusters:
  local:
    type: local
EOF
cat > train.yaml <<EOF
name: gpu-train
cluster: local
resources: {gpus: 1}
health: {gpu_sample_seconds: ${SAMPLE_S:-1}, gpu_idle_minutes: ${IDLE_MIN:-0.25}}
env: {BUSY_S: "${BUSY_S:-35}", IDLE_S: "${IDLE_S:-20}"}
command: '"$py" train.py'
EOF
cat > queued.yaml <<EOF
name: gpu-queued
cluster: local
resources: {gpus: 1}
health: {gpu_sample_seconds: ${SAMPLE_S:-1}}
env: {BUSY_S: "3", IDLE_S: "0", MIN_STEPS: "100"}
command: '"$py" train.py'
EOF
cat > two.yaml <<EOF
name: gpu-two
cluster: local
resources: {gpus: 2}
command: '"$py" train.py'
EOF

say() { echo "== $*" | tee -a "$out/summary.txt"; }
say "machine: $(nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv,noheader 2>&1 | tr '\n' ';')"
runjob clusters check local > "$out/clusters-check.txt" 2>&1; say "clusters check local: exit $?"
cat "$out/clusters-check.txt"

runjob submit two.yaml --yes > "$out/refused.txt" 2>&1; rc=$?
say "2-GPU job: exit $rc (must be non-zero): $(grep -v '^\s*$' "$out/refused.txt" | tail -1)"

runjob submit train.yaml --yes > "$out/submit-train.txt" 2>&1; say "submit gpu-train: exit $? $(tail -1 "$out/submit-train.txt")"
runjob submit queued.yaml --yes > "$out/submit-queued.txt" 2>&1; say "submit gpu-queued: exit $? $(tail -1 "$out/submit-queued.txt")"
sleep 3
runjob status --json > "$out/status-early.json" 2>&1
"$py" - "$out/status-early.json" <<'EOF' | tee -a "$out/summary.txt"
import json, sys
text = open(sys.argv[1]).read()  # event lines (JSON) may come before the status document
for job in json.loads(text[text.find("\n[") + 1:] if not text.startswith("[") else text):
    a = job["attempts"][-1]
    print(f"   early: {job['name']}: {a['state']} ({a['reason']}) gpus={a.get('gpus')}")
EOF

timeout 400 "$py" -m runjob_core watch gpu-train gpu-queued > "$out/watch.txt" 2>&1; say "watch: exit $?"
runjob status --json > "$out/status.json" 2>&1
runjob status gpu-train > "$out/status-train.txt" 2>&1
runjob report gpu-train --json > "$out/report-train.json" 2>&1
runjob report gpu-queued --json > "$out/report-queued.json" 2>&1
runjob report gpu-train > "$out/report-train.txt" 2>&1
runjob events gpu-train > "$out/events.txt" 2>&1
runjob events gpu-queued >> "$out/events.txt" 2>&1
runjob logs gpu-train > "$out/train.log" 2>&1
runjob logs gpu-queued > "$out/queued.log" 2>&1
telemetry=$(find "$project/.runjob" -name 'gpu-train.*.gpu.csv' | sort | head -1)
head -20 "$telemetry" > "$out/telemetry-head.csv" 2>/dev/null
cp "$telemetry" "$out/telemetry-train.csv" 2>/dev/null

"$py" - "$out" <<'EOF' | tee -a "$out/summary.txt"
import json, sys
out = sys.argv[1]
text = open(f"{out}/status.json").read()  # event lines (JSON) may come before the status document
status = {j["name"]: j for j in json.loads(text[text.find("\n[") + 1:] if not text.startswith("[") else text)}
train, queued = status["gpu-train"]["attempts"][-1], status["gpu-queued"]["attempts"][-1]


def clock(log):  # the jobs' own start and end times ([check] lines of gpu_local_train.py)
    marks = dict(line.split("=", 1) for line in open(f"{out}/{log}").read().split() if line.startswith(("started_at=", "ended_at=")))
    return float(marks["started_at"]), float(marks["ended_at"])


(t0, t1), (q0, q1) = clock("train.log"), clock("queued.log")
print(f"   gpu-train: {train['state']} on GPU {train.get('gpus')}, its command ran {t1 - t0:.1f} s")
print(f"   gpu-queued: {queued['state']} on GPU {queued.get('gpus')}, its command started {q0 - t1:.1f} s after gpu-train's ended")
print(f"   overlap of the two 1-GPU jobs: {'YES (wrong)' if q0 < t1 else 'none'}")
report = json.load(open(f"{out}/report-train.json"))
print(f"   report gpu: {json.dumps(report.get('gpu'))}")
print(f"   estimate memory: gpu_peak_gib={report['estimate'].get('gpu_peak_gib')} from {report['estimate'].get('gpu_peak_source')}")
print(f"   anomalies: {[a['label'] for a in report['anomalies']]}")
EOF
grep -h "gpu_idle\|gpu_memory" "$out/events.txt" | tee -a "$out/summary.txt"
echo "--- status.json"; cat "$out/status.json"
echo "--- report-train.json"; cat "$out/report-train.json"
echo "--- telemetry-head.csv"; cat "$out/telemetry-head.csv"
echo "--- events"; cat "$out/events.txt"
say "took $(( $(date +%s) - started )) s; work folder $work"
