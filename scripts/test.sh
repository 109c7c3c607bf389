#!/usr/bin/env bash
# Installs what the tests need, builds, and runs every test (unit, exactness
# against the real XGBoost and scikit-learn, FUSE mounts over RocksDB, a
# directory and redis, traces, the Debian package), then builds again with
# AddressSanitizer + UndefinedBehaviorSanitizer and runs the unit tests and
# the filesystem tests on that build, then builds the libFuzzer targets,
# replays fuzz/regression/ and fuzzes each target for 30 s (scripts/fuzz.sh).
# PACSET_SKIP_SANITIZERS=1 skips the second build, PACSET_SKIP_FUZZ=1 the
# fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/check-format.sh
bash scripts/build.sh
(cd build && ctest --output-on-failure -j2 --timeout 1200)
if [ "${PACSET_SKIP_SANITIZERS:-0}" != 1 ]; then
  echo "== sanitizer build (address, undefined)"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPACSET_SANITIZE=address,undefined -DPACSET_BUILD_BENCHMARKS=OFF -DPACSET_BUILD_PYTHON=OFF >/dev/null
  cmake --build build-asan -j"$(nproc)"
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  for t in pacset_unit_tests pacset_store_tests pacset_trace_tests; do
    ASAN_OPTIONS=detect_leaks=1 build-asan/tests/$t --gtest_brief=1
  done
  # The daemon and the engine under the sanitizers, on real mounts.
  ASAN_OPTIONS=detect_leaks=0 /usr/bin/python3 tests/fs/fs_test.py \
    --pacset build-asan/tools/pacset --pacsetfs build-asan/tools/pacsetfs
fi
if [ "${PACSET_SKIP_FUZZ:-0}" != 1 ]; then
  echo "== fuzz targets (clang, libFuzzer, address, undefined): 30 s each"
  bash scripts/fuzz.sh 30
fi
