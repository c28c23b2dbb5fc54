#!/usr/bin/env bash
# A node whose pools are GPU memory (`[node] pool_backend = "cuda"`) and two
# worker processes that import them through CUDA IPC, write K/V rows at their
# receipts' slots and read reused rows back. Passes when every
# worker finished requests with zero reuse mismatches and zero errors, some
# prompt tokens were reused across processes, and the node's owners all
# validate with nothing leaked once the workers are gone.
#   gpu/check-gpu-pools.sh KVRT_BINARY SCRATCH_DIR [KVRT_C_SMOKE]
# With KVRT_C_SMOKE (api/c_smoke.c built), a libkvrt session also imports
# the pools (connect, admit, write and read rows through the device store,
# reuse, fork, statistics) and must end with "kvrt_c_smoke: ok".
# KVRT_POOL_BACKEND=shm runs the same check over shared-memory pools (to
# check this script on a machine without a GPU).
set -u
kvrt=$1
dir=$2
c_smoke=${3:-}
backend=${KVRT_POOL_BACKEND:-cuda}
cd "$(dirname "$0")/.."
mkdir -p "$dir"
sed -e 's|^layout = "|layout = "'"$(pwd)"'/tests/data/node/|' -e 's|^\[node\]$|[node]\npool_backend = "'"$backend"'"|' \
  tests/data/node/node-test.toml >"$dir/node.toml"
rm -f "$dir/node.json"
"$kvrt" node --config "$dir/node.toml" --descriptor "$dir/node.json" >"$dir/node.log" 2>&1 &
node=$!
for _ in $(seq 100); do
  [ -s "$dir/node.json" ] && break
  kill -0 $node 2>/dev/null || break  # it stopped: start-up refused
  sleep 0.1
done
if [ ! -s "$dir/node.json" ]; then
  kill $node 2>/dev/null
  # No usable GPU: skipped, as kvrt_gpu_tests reports it (exit 77).
  if grep -q "no CUDA device" "$dir/node.log"; then echo "skipped: $(tail -1 "$dir/node.log")"; exit 77; fi
  echo "node did not start"; cat "$dir/node.log"; exit 1
fi
# GPU pools: the descriptor names their device, never their IPC handles
# (only worker sessions' receipts carry those).
if [ "$backend" = cuda ] && ! grep -q '"on_gpu": true' "$dir/node.json"; then
  echo "descriptor names no GPU pool"; kill $node; exit 1
fi
if grep -q cuda_ipc_handle "$dir/node.json"; then
  echo "descriptor carries a CUDA IPC handle"; kill $node; exit 1
fi
"$kvrt" worker --node "$dir/node.json" --principal worker-0 --duration 3 --seed 1 --json >"$dir/w0.json" 2>"$dir/w0.log" &
w0=$!
"$kvrt" worker --node "$dir/node.json" --principal worker-1 --duration 3 --seed 2 --json >"$dir/w1.json" 2>"$dir/w1.log"
rc1=$?
wait $w0
rc0=$?
smoke_rc=0
if [ -n "$c_smoke" ]; then
  "$c_smoke" "$dir/node.json" worker-0 test/shared >"$dir/c_smoke.log" 2>&1 || smoke_rc=$?
  if ! grep -q "kvrt_c_smoke: ok" "$dir/c_smoke.log" && [ "$smoke_rc" -eq 0 ]; then smoke_rc=1; fi
  echo "libkvrt on these pools: $(tail -1 "$dir/c_smoke.log") (rc $smoke_rc)"
fi
sleep 0.5
"$kvrt" stats --node "$dir/node.json" --json >"$dir/stats.json" 2>"$dir/stats.log"
kill -TERM $node
wait $node
python3 - "$dir" "$rc0" "$rc1" "$backend" "$smoke_rc" <<'PY'
import json, sys
d, rcs = sys.argv[1], sys.argv[2:4] + sys.argv[5:6]
ok = all(rc == "0" for rc in rcs)
hits = 0
for w in ("w0", "w1"):
    lines = [l for l in open(f"{d}/{w}.json") if l.startswith("{")]
    s = json.loads(lines[-1]) if lines else {}
    print(w, {k: s.get(k) for k in ("requests", "hit_tokens", "reused_rows_checked", "reuse_mismatches",
                                    "operation_errors", "successors_published", "first_error")})
    ok = ok and s.get("requests", 0) > 0 and s.get("reuse_mismatches") == 0 and s.get("operation_errors") == 0
    hits += s.get("hit_tokens", 0)
st = json.load(open(f"{d}/stats.json"))
print("node", {k: st.get(k) for k in ("validate_ok", "leaked_blocks", "refcount_delta", "live_leases",
                                       "workers_connected")})
node = st.get("owners", {}).get("node", {})
node = node.get("values", node)  # gauges of the node's own line
on_gpu = node.get("pools_on_gpu")
print("pools on gpu", on_gpu)
ok = ok and hits > 0 and st.get("validate_ok") is True and st.get("leaked_blocks") == 0 \
    and st.get("refcount_delta") == 0 and st.get("live_leases") == 0 \
    and ((on_gpu or 0) > 0) == (sys.argv[4] == "cuda")
print("test cases: gpu pools", "passed" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY
