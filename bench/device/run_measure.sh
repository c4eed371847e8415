#!/usr/bin/env bash
# One prepared GPU run: real nvidia-smi output (for the stand-in's fidelity and the telemetry parser) and
# bench/device/measure_h200.py's rates and peaks. Usage: bash bench/device/run_measure.sh OUT_DIR
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
{
  echo '$ nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.used,utilization.gpu --format=csv,noheader,nounits'
  nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.used,utilization.gpu --format=csv,noheader,nounits
  echo '$ nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.used --format=csv'
  nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.used --format=csv
  echo '$ nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits (idle)'
  nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits
  echo '$ nvidia-smi -L'; nvidia-smi -L
  echo '$ nvidia-smi'; nvidia-smi
} > "$out/nvidia-smi.txt" 2>&1
nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used,power.draw,temperature.gpu \
  --format=csv,noheader,nounits -l 1 > "$out/telemetry.csv" 2>&1 &
sampler=$!
( sleep 45; { echo '$ nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits (busy)';
  nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits; } >> "$out/nvidia-smi.txt" 2>&1 ) &
PYTHONUNBUFFERED=1 python3 bench/device/measure_h200.py "$out" 2>&1 | tee "$out/measure.log"
kill $sampler 2>/dev/null
wait
