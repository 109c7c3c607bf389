#!/usr/bin/env bash
# Installs what the tests need, builds, and runs every test (unit, exactness
# against the real XGBoost and scikit-learn, FUSE mounts over RocksDB, a
# directory and redis, traces, the Debian package); then one clang build with
# AddressSanitizer + UndefinedBehaviorSanitizer, libFuzzer's coverage and the
# locking annotations checked (-Wthread-safety, as errors) runs the unit,
# store, trace and filesystem tests, the crafted-file and filesystem tests on
# real mounts, replays fuzz/regression/ and fuzzes each target for 30 s
# (scripts/fuzz.sh); a ThreadSanitizer build runs the store, fs and trace
# tests and the filesystem tests. Sanitizer builds use -O1 -g1 (line tables:
# enough for their reports). Each stage's time is printed as it ends, and all
# of them at the end.
# PACSET_SKIP_SANITIZERS=1 skips the sanitizer builds, PACSET_SKIP_FUZZ=1
# the fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."

# Stage timing: `stage NAME` ends the previous stage (printing its time) and
# starts NAME; the table of all of them is printed when the script exits.
stage_names=()
stage_seconds=()
stage_start=$SECONDS
stage() {
  if [ ${#stage_names[@]} -gt 0 ]; then
    stage_seconds+=($((SECONDS - stage_start)))
    echo "== ${stage_names[-1]}: ${stage_seconds[-1]} s"
  fi
  stage_start=$SECONDS
  [ $# -gt 0 ] || return 0
  stage_names+=("$1")
  echo "== $1"
}
report_stages() {
  local status=$?
  stage
  echo "== stage times (exit status $status)"
  for i in "${!stage_seconds[@]}"; do
    printf '   %5d s  %s\n' "${stage_seconds[$i]}" "${stage_names[$i]}"
  done
  printf '   %5d s  total\n' "$SECONDS"
}
trap report_stages EXIT

SANITIZER_FLAGS=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DPACSET_BUILD_BENCHMARKS=OFF
  -DPACSET_BUILD_PYTHON=OFF)

stage "install dependencies"
bash scripts/install-deps.sh
stage "format and layers"
bash scripts/check-format.sh
bash scripts/check-layers.sh
stage "build (gcc, RelWithDebInfo)"
bash scripts/build.sh
stage "tests (ctest)"
(cd build && ctest --output-on-failure -j2 --timeout 1200)
if [ "${PACSET_SKIP_SANITIZERS:-0}" != 1 ]; then
  stage "sanitizer build (clang: address, undefined, fuzzer coverage, -Wthread-safety)"
  CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja "${SANITIZER_FLAGS[@]}" \
    -DPACSET_SANITIZE=address,undefined -DPACSET_FUZZ=ON >/dev/null
  cmake --build build-asan -j"$(nproc)"
  stage "sanitizer tests (address, undefined)"
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

  if [ "${PACSET_SKIP_FUZZ:-0}" != 1 ]; then
    stage "fuzz: replay fuzz/regression, then 30 s a target (build-asan)"
    PACSET_FUZZ_BUILD_DIR=build-asan bash scripts/fuzz.sh 30
  fi

  stage "ThreadSanitizer build: store, fs and trace tests, the tools"
  cmake -S . -B build-tsan -G Ninja "${SANITIZER_FLAGS[@]}" -DPACSET_SANITIZE=thread >/dev/null
  cmake --build build-tsan -j"$(nproc)" --target pacset_store_tests pacset_trace_tests \
    pacset_fs_tests pacset_fs_mount_tests pacset pacsetfs pacset-trace
  stage "ThreadSanitizer tests"
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp"
  for t in pacset_fs_tests pacset_fs_mount_tests pacset_store_tests pacset_trace_tests; do
    build-tsan/tests/$t --gtest_brief=1
  done
  /usr/bin/python3 tests/fs/fs_test.py --pacset build-tsan/tools/pacset \
    --pacsetfs build-tsan/tools/pacsetfs
  /usr/bin/python3 tests/fs/trace_test.py --pacset build-tsan/tools/pacset \
    --pacsetfs build-tsan/tools/pacsetfs --pacset-trace build-tsan/tools/pacset-trace
elif [ "${PACSET_SKIP_FUZZ:-0}" != 1 ]; then
  stage "fuzz: replay fuzz/regression, then 30 s a target"
  bash scripts/fuzz.sh 30
fi
