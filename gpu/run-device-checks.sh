#!/usr/bin/env bash
# One call verifies every CUDA piece of kvrt on a machine with a GPU:
# the attention kernels (paged decode with split-K, the cascade path with the
# exact LSE merge) against the CPU FP64 reference, the COW block-copy kernel,
# CUDA IPC and VMM-fd import by another process, the mapper's VMM backing,
# compute-sanitizer's memcheck over the attention checks, the node's GPU
# pools (device store against the host store, then a node with
# pool_backend = "cuda", two worker processes and a libkvrt program that
# import its pools: gpu/check-gpu-pools.sh), `kvrt run` served over GPU
# pools against the same run over shared memory (gpu/check-gpu-run.sh),
# and the benchmark table (kvrt_gpu_tests --bench).
#
#   gpu/run-device-checks.sh pack   on a build machine with nvcc (no GPU
#                                   needed): builds kvrt_gpu_tests with CUDA
#                                   and packs it with the shared libraries a
#                                   bare CUDA image may lack into .device-bundle/
#   gpu/run-device-checks.sh        on the GPU machine: runs the packed bundle,
#                                   or builds kvrt_gpu_tests first when there is
#                                   no bundle (a full development machine)
#
# Output: one line per check group and the benchmark table; with $OUT set
# (the device tool), logs and bench.json are written there too.
set -u
cd "$(dirname "$0")/.."
root=$(pwd)
bundle="$root/.device-bundle"

if [ "${1:-}" = "pack" ]; then
  set -e
  build="${KVRT_GPU_BUILD_DIR:-$root/build-gpu}"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVRT_WITH_CUDA=ON >/dev/null
  cmake --build "$build" -j"$(nproc)" --target kvrt_gpu_tests kvrt kvrt_c_smoke
  rm -rf "$bundle" && mkdir -p "$bundle/lib"
  cp "$build/tests/kvrt_gpu_tests" "$build/apps/kvrt/kvrt" "$build/api/kvrt_c_smoke" "$bundle/"
  # Everything but the C/C++ runtime and the dynamic loader travels along
  # (libkvrt.so.1 with kvrt_c_smoke).
  ldd "$build/tests/kvrt_gpu_tests" "$build/apps/kvrt/kvrt" "$build/api/kvrt_c_smoke" | awk '/=> \//{print $3}' | sort -u |
    grep -v -E '/(libc|libm|libgcc_s|libstdc\+\+|libpthread|libdl|librt)\.so' |
    while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
  grep -qx '/.device-bundle/' "$root/.git/info/exclude" 2>/dev/null || echo '/.device-bundle/' >>"$root/.git/info/exclude"
  echo "packed $(du -sh "$bundle" | cut -f1) into $bundle (carry .device-bundle)"
  exit 0
fi

out="${OUT:-/tmp/kvrt-device-checks}"
mkdir -p "$out"
if [ -x "$bundle/kvrt_gpu_tests" ]; then
  bin="$bundle/kvrt_gpu_tests"
  kvrt_bin="$bundle/kvrt"
  c_smoke="$bundle/kvrt_c_smoke"
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$bundle/lib"
else
  build="${KVRT_GPU_BUILD_DIR:-$root/build-gpu}"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVRT_WITH_CUDA=ON >"$out/build.log" 2>&1 &&
    cmake --build "$build" -j"$(nproc)" --target kvrt_gpu_tests kvrt kvrt_c_smoke >>"$out/build.log" 2>&1 ||
    { echo "build failed: see $out/build.log"; tail -20 "$out/build.log"; exit 1; }
  bin="$build/tests/kvrt_gpu_tests"
  kvrt_bin="$build/apps/kvrt/kvrt"
  c_smoke="$build/api/kvrt_c_smoke"
fi

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
failures=0
run_group() {  # name, timeout [s], command...
  local name=$1 limit=$2
  shift 2
  local start=$(date +%s%N)
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  local tenths=$((($(date +%s%N) - start) / 100000000))
  local took="$((tenths / 10)).$((tenths % 10))"
  local verdict=pass
  if [ $rc -eq 77 ]; then verdict=skipped; elif [ $rc -ne 0 ]; then verdict="FAIL (rc $rc)"; failures=$((failures + 1)); fi
  printf '%-22s %-14s %6ss  %s\n' "$name" "$verdict" "$took" "$(grep -E 'test cases|skipped:|ERROR SUMMARY' "$out/$name.log" | tail -1)"
  if [ "$verdict" != pass ] && [ "$verdict" != skipped ]; then
    grep -E -B2 -A12 'FAILED|FAIL |error|Error' "$out/$name.log" | head -60
  fi
}
run_group backend 120 "$bin" "[backend]"
run_group vmm 120 "$bin" "[vmm]~[ipc]"
run_group attention 300 "$bin" "[attention]"
run_group ipc 120 "$bin" "[ipc]"
run_group pools 120 "$bin" "[pools]"
run_group node_gpu_pools 120 gpu/check-gpu-pools.sh "$kvrt_bin" "$out/gpu-pools" "$c_smoke"
run_group gpu_run 180 gpu/check-gpu-run.sh "$kvrt_bin" "$out/gpu-run"
if command -v compute-sanitizer >/dev/null; then
  run_group memcheck 240 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin" "[memcheck]"
fi
timeout 300 "$bin" --bench --json >"$out/bench.json" 2>"$out/bench.err"
rc=$?
if [ $rc -ne 0 ]; then
  echo "bench FAIL (rc $rc)"; cat "$out/bench.err"; failures=$((failures + 1))
else
  python3 - "$out/bench.json" <<'EOF' || cat "$out/bench.json"
import json, sys
doc = json.load(open(sys.argv[1]))
print(f"bench on {doc['machine']['device']} (medians of 5 trials)")
print(f"{'name':34} {'value':>10} {'unit':9} {'baseline':>10} {'ratio':>7}")
for r in doc["rows"]:
    b = f"{r['baseline']:10.4g} {r['ratio']:7.3f}" if "baseline" in r else ""
    print(f"{r['name']:34} {r['value']:10.4g} {r['unit']:9} {b}")
EOF
fi
echo "device checks: $failures failure(s); logs in $out"
exit $((failures > 0))
