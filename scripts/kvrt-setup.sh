#!/usr/bin/env bash
# kvrt set-up: installs what is missing (Debian 12 packages only), configures
# CMake (Release, Ninja, ccache) and builds. Then runs the requested job:
#   scripts/kvrt-setup.sh main    build the kvrt binary + run the main job (`kvrt run`) on the embedded default
#   scripts/kvrt-setup.sh test    build + run the whole test suite (what CI runs)
#   scripts/kvrt-setup.sh build   build only
#   scripts/kvrt-setup.sh sanitize  build into build-sanitize/ with AddressSanitizer and
#                                 UndefinedBehaviorSanitizer, then run the whole test suite
#                                 (about 35 minutes to build on 2 cores; not part of CI)
#   scripts/kvrt-setup.sh fuzz [SECONDS|runs=N] [TARGET...]
#                                 build the libFuzzer targets into build-fuzz/ with clang-14,
#                                 AddressSanitizer and UndefinedBehaviorSanitizer, then fuzz each
#                                 target (all of fuzz/targets/ by default) for SECONDS (60; 0: run
#                                 the corpus once; runs=N: N executions) over a copy of its corpus; non-zero on any crash,
#                                 leak or timeout (docs/fuzzing.md; not part of CI, whose suite
#                                 replays the corpus with g++)
# Fast when everything is already there: dpkg is queried, apt runs only for
# missing packages, and ccache makes an unchanged rebuild take about a second.
set -euo pipefail

job="${1:-main}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVRT_BUILD_DIR:-$root/build}"

packages=(
  build-essential cmake ninja-build pkg-config ccache
  libcaf-dev libboost-dev capnproto libcapnp-dev catch2 libspdlog-dev
  libtomlplusplus-dev libcli11-dev libssl-dev libxxhash-dev nlohmann-json3-dev
  # The Python package (python/) and its tests (tests/python/): pybind11,
  # NumPy, pytest, and torch on the CPU for the test engines.
  python3-dev pybind11-dev python3-numpy python3-pytest python3-torch
  # KV events on vLLM's wire (events/) and the Python subscriber of their tests.
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev python3-zmq python3-msgpack
  # The Prometheus endpoint (metrics/), its scrape tests (the client's
  # parser) and promtool, which checks the exposition and the alert rules.
  libcpp-httplib-dev python3-prometheus-client prometheus python3-yaml
)
# libFuzzer comes with clang; only the fuzz job needs them.
if [ "$job" = fuzz ]; then
  packages+=(clang-14 libfuzzer-14-dev libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "kvrt-setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
  "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"
fi

export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
jobs="$(nproc)"
# Warnings are errors in kvrt's own code for every job but sanitize and fuzz
# (whose instrumentation adds its own diagnostics).
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DKVRT_WERROR=ON)
if [ "$job" = sanitize ]; then
  # A separate tree: every object differs. UB aborts the test that hit it
  # (-fno-sanitize-recover) so that CTest reports it as a failure. CUDA is
  # off: nvcc objects would not be instrumented.
  build="${KVRT_BUILD_DIR:-$root/build-sanitize}"
  flags="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined -Wno-psabi"
  cmake_args=(-DCMAKE_BUILD_TYPE=Debug -DKVRT_WITH_CUDA=OFF "-DCMAKE_CXX_FLAGS=$flags"
              "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined")
fi
if [ "$job" = fuzz ]; then
  # A separate clang tree: the libraries carry libFuzzer's coverage
  # instrumentation without its main (fuzzer-no-link), only the fuzz
  # executables link libFuzzer itself (fuzz/CMakeLists.txt). UB aborts, so
  # that libFuzzer records it as a crash. CUDA is off, as for sanitize.
  build="${KVRT_BUILD_DIR:-$root/build-fuzz}"
  # The JSON library's own functions get no coverage instrumentation
  # (fuzz/coverage-ignorelist.txt): the sanitizers still check them.
  flags="-O2 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
  flags+=" -fsanitize-coverage-ignorelist=$root/fuzz/coverage-ignorelist.txt"
  cmake_args=(-DCMAKE_BUILD_TYPE=Debug -DKVRT_WITH_CUDA=OFF -DKVRT_FUZZ=ON
              -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14
              "-DCMAKE_C_FLAGS=$flags" "-DCMAKE_CXX_FLAGS=$flags"
              "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined")
fi
# Configure a new tree, one configured before warnings became errors, or a
# sanitizer or fuzz tree configured with other flags than these.
stale_tree=false
if [ ! -f "$build/build.ninja" ]; then
  stale_tree=true
elif [ "$job" = sanitize ] || [ "$job" = fuzz ]; then
  grep -qxF "CMAKE_CXX_FLAGS:STRING=$flags" "$build/CMakeCache.txt" || stale_tree=true
else
  grep -q '^KVRT_WERROR:BOOL=ON$' "$build/CMakeCache.txt" || stale_tree=true
fi
if [ "$stale_tree" = true ]; then
  cmake -S "$root" -B "$build" -G Ninja "${cmake_args[@]}" ${KVRT_CMAKE_ARGS:-}
fi
# The main job needs only the kvrt binary and the fuzz job its fuzzers; the
# others build everything (every test suite, the peers, the GPU checks).
if [ "$job" = main ]; then
  cmake --build "$build" -j "$jobs" --target kvrt
elif [ "$job" = fuzz ]; then
  cmake --build "$build" -j "$jobs" --target kvrt_fuzzers
else
  cmake --build "$build" -j "$jobs"
fi

case "$job" in
  build) ;;
  main)
    # The main job on the embedded default (CPU shared-memory pools, no GPU):
    # a node and 4 worker processes serve the default workload mix end to end;
    # the summary ends with the exactness verdict, the report lands in
    # runs/<UTC timestamp>/report.md.
    cd "$root"
    "$build/apps/kvrt/kvrt" run --config config/run.toml
    ;;
  test)
    cd "$build"
    ctest --output-on-failure -j "$jobs" --timeout 600
    ;;
  sanitize)
    cd "$build"
    ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}" \
      LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$root/scripts/lsan-caf.supp}" \
      ctest --output-on-failure -j "$jobs" --timeout 900
    ;;
  fuzz)
    shift || true
    seconds="${1:-60}"
    shift || true
    targets=("$@")
    if ((${#targets[@]} == 0)); then
      for f in "$root"/fuzz/targets/*.cpp; do targets+=("$(basename "$f" .cpp)"); done
    fi
    # Each target fuzzes a copy of its corpus: what libFuzzer adds stays in
    # build-fuzz/corpus/, crash, leak, timeout and OOM inputs in
    # build-fuzz/artifacts/<target>/ (a crash becomes fuzz/corpus/<target>/regression-<what>,
    # docs/fuzzing.md). Run it under `taskset -c N nice -n 10` to keep it to one core.
    # SECONDS 0 runs each corpus once under the sanitizers and fuzzes nothing
    # (libFuzzer's -max_total_time=0 would mean no limit).
    # runs=N instead of SECONDS: each target executes N inputs, however long
    # that takes (the recorded 10^7 per target, docs/fuzzing.md).
    if [ "$seconds" = 0 ]; then
      limit=(-runs=0)
    elif [[ "$seconds" == runs=* ]]; then
      limit=(-runs="${seconds#runs=}")
    else
      limit=(-max_total_time="$seconds")
    fi
    # The job starts each target on a fresh copy of the seeds, so it empties
    # build-fuzz/corpus/<target>/ first. A fuzzer already running on that
    # folder (a hand-run campaign, docs/fuzzing.md) would lose what it found:
    # refuse instead. A fuzzer's corpus folders are its arguments that are
    # not flags, relative to its working directory.
    for t in "${targets[@]}"; do
      work="$(realpath -m "$build/corpus/$t")"
      for pid in $(pgrep -f "kvrt_fuzz_$t( |\$)" || true); do
        cwd="$(readlink "/proc/$pid/cwd" 2>/dev/null)" || continue
        mapfile -d '' args 2>/dev/null <"/proc/$pid/cmdline" || continue
        for arg in "${args[@]:1}"; do
          [[ "$arg" == -* ]] && continue
          if [ "$(cd "$cwd" && realpath -m -- "$arg")" = "$work" ]; then
            echo "kvrt-setup: process $pid is fuzzing $work; stop it or set KVRT_BUILD_DIR to another tree" >&2
            exit 2
          fi
        done
      done
    done
    status=0
    printf '%-16s %12s %9s %7s %7s %8s\n' target executions exec/s cov ft crashes
    for t in "${targets[@]}"; do
      fuzzer="$build/fuzz/kvrt_fuzz_$t"
      [ -x "$fuzzer" ] || { echo "kvrt-setup: no fuzz target $t" >&2; exit 2; }
      work="$build/corpus/$t"
      artifacts="$build/artifacts/$t"
      log="$build/logs/$t.log"
      rm -rf "$work" "$artifacts"
      mkdir -p "$work" "$artifacts" "$(dirname "$log")"
      cp "$root/fuzz/corpus/$t"/* "$work"/
      rc=0
      # One process per corpus copy: nothing to reload from other processes
      # (libFuzzer's default stats the whole corpus folder every second,
      # which grows with every input found and reduced).
      # ASan records a stack for every allocation; 4 frames instead of 30
      # take a fifth of the replays' time back (each JSON line allocates) and
      # still name the allocation site. Rerun an artifact with
      # ASAN_OPTIONS=malloc_context_size=30 for the full stack.
      ASAN_OPTIONS="${ASAN_OPTIONS:-malloc_context_size=4}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}" \
        "$fuzzer" "${limit[@]}" -reload=0 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" "$work" >"$log" 2>&1 || rc=$?
      execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
      rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
      cov="$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)"
      ft="$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)"
      crashes="$(find "$artifacts" -type f | wc -l)"
      printf '%-16s %12s %9s %7s %7s %8s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$crashes"
      if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
        status=1
        echo "kvrt-setup: $t failed (libFuzzer exit $rc); see $log and $artifacts/" >&2
      fi
    done
    exit "$status"
    ;;
  *)
    echo "usage: scripts/kvrt-setup.sh [main|test|build|sanitize|fuzz [SECONDS|runs=N] [TARGET...]]" >&2
    exit 2
    ;;
esac
