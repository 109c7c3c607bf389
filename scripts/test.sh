#!/usr/bin/env bash
# Installs what the tests need, builds, and runs every test (unit, exactness
# against the real XGBoost and scikit-learn, FUSE mounts over RocksDB, a
# directory and redis, traces, the Debian package), then builds again with
# AddressSanitizer + UndefinedBehaviorSanitizer and runs the unit tests and
# the filesystem tests on that build, checks the locking annotations with
# clang's -Wthread-safety, runs the store, fs, trace and filesystem tests on a
# ThreadSanitizer build, then builds the libFuzzer targets, replays
# fuzz/regression/ and fuzzes each target for 30 s (scripts/fuzz.sh).
# PACSET_SKIP_SANITIZERS=1 skips the sanitizer and analysis builds,
# PACSET_SKIP_FUZZ=1 the fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/check-format.sh
bash scripts/check-layers.sh
bash scripts/build.sh
(cd build && ctest --output-on-failure -j2 --timeout 1200)
if [ "${PACSET_SKIP_SANITIZERS:-0}" != 1 ]; then
  echo "== sanitizer build (address, undefined)"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPACSET_SANITIZE=address,undefined -DPACSET_BUILD_BENCHMARKS=OFF -DPACSET_BUILD_PYTHON=OFF >/dev/null
  cmake --build build-asan -j"$(nproc)"
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  for t in pacset_unit_tests pacset_store_tests pacset_trace_tests pacset_fs_tests \
    pacset_fs_mount_tests; do
    ASAN_OPTIONS=detect_leaks=1 build-asan/tests/$t --gtest_brief=1
  done
  # Issue 31's crafted forests through the command line, under the sanitizers.
  /usr/bin/python3 tests/security/hostile_pac_test.py --pacset build-asan/tools/pacset
  # The daemon and the engine under the sanitizers, on real mounts.
  ASAN_OPTIONS=detect_leaks=0 /usr/bin/python3 tests/fs/fs_test.py \
    --pacset build-asan/tools/pacset --pacsetfs build-asan/tools/pacsetfs

  echo "== thread-safety analysis (clang -Wthread-safety): store, fs and trace libraries"
  CC=clang-14 CXX=clang++-14 cmake -S . -B build-tsa -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DPACSET_BUILD_TESTS=OFF -DPACSET_BUILD_BENCHMARKS=OFF -DPACSET_BUILD_PYTHON=OFF >/dev/null
  cmake --build build-tsa -j"$(nproc)" --target pacset_store pacset_fs pacset_protocol pacset_trace

  echo "== ThreadSanitizer build: store, cache and fs unit tests, trace tests, filesystem tests"
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPACSET_SANITIZE=thread -DPACSET_BUILD_BENCHMARKS=OFF -DPACSET_BUILD_PYTHON=OFF >/dev/null
  cmake --build build-tsan -j"$(nproc)" --target pacset_store_tests pacset_trace_tests \
    pacset_fs_tests pacset_fs_mount_tests pacset pacsetfs pacset-trace
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp"
  for t in pacset_fs_tests pacset_fs_mount_tests pacset_store_tests pacset_trace_tests; do
    build-tsan/tests/$t --gtest_brief=1
  done
  /usr/bin/python3 tests/fs/fs_test.py --pacset build-tsan/tools/pacset \
    --pacsetfs build-tsan/tools/pacsetfs
  /usr/bin/python3 tests/fs/trace_test.py --pacset build-tsan/tools/pacset \
    --pacsetfs build-tsan/tools/pacsetfs --pacset-trace build-tsan/tools/pacset-trace
fi
if [ "${PACSET_SKIP_FUZZ:-0}" != 1 ]; then
  echo "== fuzz targets (clang, libFuzzer, address, undefined): 30 s each"
  bash scripts/fuzz.sh 30
fi
