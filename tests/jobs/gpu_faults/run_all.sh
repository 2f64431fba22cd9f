#!/usr/bin/env bash
# Run every GPU fault job and keep what a user would hand over: torchrun's console (--tee 3) and its --log-dir.
#   bash tests/jobs/gpu_faults/run_all.sh OUTDIR
# Needs one CUDA GPU and torch with NCCL. Every job is a single-node torchrun (--standalone), in three lanes at
# once, each under `timeout` so nothing outlives the script. Writes OUTDIR/<job>/{console.log,logdir/,command.txt},
# OUTDIR/summary.txt (exit code and seconds per job) and OUTDIR/versions.txt.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
OUTDIR=$(mkdir -p "$1" && cd "$1" && pwd)
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=lo PG_TIMEOUT_S=20

job() {  # job NAME NPROC LIMIT_S SCRIPT [VAR=VALUE ...]
  local name=$1 nproc=$2 limit=$3 script=$4; shift 4
  local dir=$OUTDIR/$name start rc
  mkdir -p "$dir/fr"
  local cmd=("$PY" -m torch.distributed.run --standalone --nproc-per-node "$nproc" --tee 3 --log-dir "$dir/logdir"
             "$HERE/$script")
  printf '%s ' "$@" "${cmd[@]}" >"$dir/command.txt"; echo >>"$dir/command.txt"
  start=$(date +%s)
  (cd "$dir" && env "$@" timeout -k 5 "$limit" "${cmd[@]}" >"$dir/console.log" 2>&1)
  rc=$?
  echo "$name rc=$rc seconds=$(( $(date +%s) - start ))" >>"$OUTDIR/summary.txt"
}

NCCL=(NCCL_DEBUG=INFO)
FR=(TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_FR_DUMP_TEMP_FILE=fr/nccl_trace_rank_)

{
  job straggler_gloo_timeout 2 120 straggler.py "${NCCL[@]}" DP_TIMEOUT_S=20 TP_TIMEOUT_S=90
  job straggler_nccl_watchdog 2 120 straggler.py "${NCCL[@]}" "${FR[@]}" DP_TIMEOUT_S=90 TP_TIMEOUT_S=15
  job oom_skip 3 120 oom_skip.py
} &
{
  job device_assert 3 90 device_assert.py
  job nan_anomaly 2 90 nan_anomaly.py
  job shape_mismatch_detail 2 90 shape_mismatch.py TORCH_DISTRIBUTED_DEBUG=DETAIL
  if "$PY" "$HERE/triton_works.py" >"$OUTDIR/triton_check.txt" 2>&1; then job illegal_access 2 90 illegal_access.py; fi
} &
{
  job oom_crash 2 90 oom_crash.py
  job nccl_duplicate_gpu 2 90 nccl_duplicate_gpu.py "${NCCL[@]}"
  job invalid_ordinal 2 90 invalid_ordinal.py "${NCCL[@]}"
  job wrong_device 2 90 wrong_device.py
} &
wait

{
  "$PY" -c 'import torch, sys; print("python", sys.version.split()[0]); print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version()))); print("gpu", torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))'
  "$PY" -c 'import triton; print("triton", triton.__version__)' 2>&1 | tail -1
  nvidia-smi --query-gpu=driver_version,name --format=csv,noheader 2>&1
} >"$OUTDIR/versions.txt"
cat "$OUTDIR/summary.txt" "$OUTDIR/versions.txt"
