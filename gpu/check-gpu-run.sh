#!/usr/bin/env bash
# `kvrt run` end to end over GPU pools: a node with pool_backend = "cuda",
# worker processes that import its pools through CUDA IPC and compute the
# reference model over host copies of them (engine/staged_model_kv_cache.hpp),
# decode on the node's executor (its CUDA kernel) for the shared-prefix
# site, and the no-reuse replay of every request. Each configuration is
# served twice, over GPU pools and over shared-memory pools in place; passes
# when both are exact with nothing leaked and serve the same requests with
# the same reuse.
#   gpu/check-gpu-run.sh KVRT_BINARY SCRATCH_DIR
# KVRT_POOL_BACKEND=shm serves the first of each pair over shared memory,
# staged (--staged-pools), to check this script on a machine without a GPU.
set -u
kvrt=$1
dir=$2
backend=${KVRT_POOL_BACKEND:-cuda}
cd "$(dirname "$0")/.."
root=$(pwd)
mkdir -p "$dir"
failures=0
serve() {  # name, run config, extra kvrt run arguments...
  local name=$1 config=$2
  shift 2
  local gpu_config="$dir/$name-$backend.toml"
  # The run config with the node's pools on the GPU (or staged over shared memory).
  # (its relative paths resolved against tests/data/run/, where it lives)
  sed -e 's|^workload = "|workload = "'"$root"'/tests/data/run/|' \
      -e 's|^layout = "|layout = "'"$root"'/tests/data/run/|' "$root/tests/data/run/$config" >"$gpu_config"
  if [ "$backend" = cuda ]; then
    sed -i 's|^\[run\]$|[run]\npool_backend = "cuda"|' "$gpu_config"
  else
    sed -i 's|^\[run\]$|[run]\nstaged_pools = true|' "$gpu_config"
  fi
  "$kvrt" run --config "$gpu_config" --out "$dir/$name-$backend" --json --quiet "$@" >"$dir/$name-$backend.json" \
    2>"$dir/$name-$backend.log"
  local rc_gpu=$?
  # No usable GPU: skipped, as kvrt_gpu_tests reports it (exit 77).
  if grep -q "no CUDA device" "$dir/$name-$backend.log"; then
    echo "skipped: $(grep -h "no CUDA device" "$dir/$name-$backend.log" | head -1)"
    exit 77
  fi
  "$kvrt" run --config "$root/tests/data/run/$config" --out "$dir/$name-in-place" --json --quiet "$@" \
    >"$dir/$name-in-place.json" 2>"$dir/$name-in-place.log"
  local rc_cpu=$?
  python3 - "$dir/$name-$backend.json" "$dir/$name-in-place.json" "$rc_gpu" "$rc_cpu" "$name" "$backend" <<'PY'
import json, sys
def summary(path):
    lines = [l for l in open(path) if l.startswith("{")]
    return json.loads(lines[-1]) if lines else {}
gpu, cpu = summary(sys.argv[1]), summary(sys.argv[2])
name, backend = sys.argv[5], sys.argv[6]
keys = ("exact", "requests", "requests_verified", "prefill_rows_reused", "prefill_rows_computed", "row_mismatches",
        "leaked_blocks", "wall_s")
print(f"{name} {backend}:", {k: gpu.get(k) for k in keys}, "pools", gpu.get("pools"),
      "node shared", {k: gpu.get("shared_prefix_execution", {}).get(k) for k in ("ops", "chunk_attention", "per_request", "refusals")})
print(f"{name} in place:", {k: cpu.get(k) for k in keys})
pools = gpu.get("pools", {})
ok = sys.argv[3] == "0" and sys.argv[4] == "0" and gpu.get("exact") is True and cpu.get("exact") is True \
    and gpu.get("leaked_blocks") == 0 and gpu.get("row_mismatches") == 0 \
    and pools.get("backend") == backend and pools.get("staged") is True and pools.get("rows_loaded", 0) > 0 \
    and all(gpu.get(k) == cpu.get(k) for k in ("requests", "prefill_rows_reused", "prefill_rows_computed"))
if name == "node-site":
    # Every shared op ran on the node (none refused): on GPU pools, the
    # CUDA cascade (reported as chunk_attention).
    x = gpu.get("shared_prefix_execution", {})
    ok = ok and x.get("ops", 0) > 0 and x.get("refusals") == 0 \
        and (backend != "cuda" or x.get("chunk_attention") == x.get("ops"))
print(f"{name}:", "passed" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY
  [ $? -eq 0 ] || { failures=$((failures + 1)); tail -5 "$dir/$name-$backend.log"; }
}
# Serial (one worker, one request at a time): the same reuse either way.
serve serial run-serial.toml
# Two levels of shared prefix, decoded on the node's executor: heads 64 wide,
# so that on GPU pools its CUDA decode and cascade kernels run every op.
serve node-site run-d64.toml --shared-prefix-site node
# A chat's turns resumed from the session tier.
serve tier run-session-tier.toml --workers 1
echo "test cases: gpu run $([ $failures -eq 0 ] && echo passed || echo "FAILED ($failures)")"
exit $((failures > 0))
