#!/usr/bin/env bash
# kvrt set-up: installs what is missing (Debian 12 packages only), configures
# CMake (Release, Ninja, ccache) and builds. Then runs the requested job:
#   scripts/kvrt-setup.sh main    build the kvrt binary + run the main job (`kvrt run`) on the embedded default
#   scripts/kvrt-setup.sh test    build + run the whole test suite (what CI runs)
#   scripts/kvrt-setup.sh build   build only
#   scripts/kvrt-setup.sh sanitize  build into build-sanitize/ with AddressSanitizer and
#                                 UndefinedBehaviorSanitizer, then run the whole test suite
#                                 (about 35 minutes to build on 2 cores; not part of CI)
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
)

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
# Warnings are errors in kvrt's own code for every job but sanitize (whose
# instrumentation adds its own diagnostics).
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
# Configure a new tree, or one configured before warnings became errors.
if [ ! -f "$build/build.ninja" ] ||
   { [ "$job" != sanitize ] && ! grep -q '^KVRT_WERROR:BOOL=ON$' "$build/CMakeCache.txt"; }; then
  cmake -S "$root" -B "$build" -G Ninja "${cmake_args[@]}" ${KVRT_CMAKE_ARGS:-}
fi
# The main job needs only the kvrt binary; the others build everything
# (every test suite, the peers, the GPU checks).
if [ "$job" = main ]; then
  cmake --build "$build" -j "$jobs" --target kvrt
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
  *)
    echo "usage: scripts/kvrt-setup.sh [main|test|build|sanitize]" >&2
    exit 2
    ;;
esac
