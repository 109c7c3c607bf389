#!/usr/bin/env bash
# Installs what the tests need, builds, and runs every test (unit, exactness
# against the real XGBoost and scikit-learn, FUSE mounts over RocksDB, a
# directory and redis, traces, the Debian package); then one clang build with
# AddressSanitizer + UndefinedBehaviorSanitizer, libFuzzer's coverage and the
# locking annotations checked (-Wthread-safety, as errors) runs the unit,
# store, trace and filesystem tests, the crafted-file and filesystem tests on
# real mounts, replays fuzz/regression/ and fuzzes each target for 30 s
# (scripts/fuzz.sh); a ThreadSanitizer build runs the store, fs and trace
# tests and the filesystem tests. The gcc build uses -O2 -g1, the sanitizer
# builds -O1 -g1 (line tables: enough for backtraces and reports). Each
# stage's time is printed as it ends, and all of them at the end (with how
# busy the CPUs were). The machine is used whole: each sanitizer build runs
# in the background at idle priority while the tests before it run (most of
# them wait on mounts, daemons, redis and child processes), so its stage is
# what is left of it; the sanitizer test binaries that ctest runs side by side
# run as nproc gtest shards at once, those it runs alone (RUN_SERIAL) alone.
# PACSET_SKIP_SANITIZERS=1 skips the sanitizer builds, PACSET_SKIP_FUZZ=1
# the fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."

# Stage timing: `stage NAME` ends the previous stage, printing its time, how
# busy the CPUs were (the idle-priority builds included) and the CPU time of
# the commands that ended in it (a build in the background counts in the stage
# where it ends); it starts NAME. The table of all of them is printed when the
# script exits. CI is CPU-bound on two cores: a stage near 100% busy gets
# shorter only with less work, not with more of it in the background.
stage_names=()
stage_seconds=()
stage_busy=()
stage_cpu=()
stage_start=$SECONDS
# The jiffies of all CPUs and of their idle time (idle and iowait), and the
# CPU seconds of this script's waited-for children (/proc/PID/stat cutime + cstime).
cpu_counters() {
  awk '/^cpu / { printf "%d %d ", $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9, $5 + $6 }' /proc/stat
  awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); print int(($14 + $15) / hz) }' /proc/$$/stat
}
read -r stage_cpu_all stage_cpu_idle stage_cpu_children < <(cpu_counters)
stage() {
  local all idle children
  read -r all idle children < <(cpu_counters)
  if [ ${#stage_names[@]} -gt 0 ]; then
    stage_seconds+=($((SECONDS - stage_start)))
    stage_busy+=($(((all - stage_cpu_all - (idle - stage_cpu_idle)) * 100 / (all - stage_cpu_all + 1))))
    stage_cpu+=($((children - stage_cpu_children)))
    echo "== ${stage_names[-1]}: ${stage_seconds[-1]} s (CPUs ${stage_busy[-1]}% busy; commands that" \
      "ended in it ${stage_cpu[-1]} CPU s)"
  fi
  stage_cpu_all=$all stage_cpu_idle=$idle stage_cpu_children=$children
  stage_start=$SECONDS
  [ $# -gt 0 ] || return 0
  stage_names+=("$1")
  echo "== $1"
}
report_stages() {
  local status=$?
  stage
  kill_idle_builds
  [ -z "${parallel_dir:-}" ] || rm -rf "$parallel_dir"
  echo "== stage times (exit status $status): wall, CPUs busy, CPU of the commands that ended in it"
  for i in "${!stage_seconds[@]}"; do
    printf '   %5d s  %3d%% busy  %5d CPU s  %s\n' "${stage_seconds[$i]}" "${stage_busy[$i]}" \
      "${stage_cpu[$i]}" "${stage_names[$i]}"
  done
  printf '   %5d s  total\n' "$SECONDS"
}
trap report_stages EXIT

# Runs commands $(nproc) at a time: `parallel_start NAME CMD...` starts one
# (waiting for a free slot), its output kept in a log; `parallel_wait` waits
# for all of them, prints the log of each that failed (the last line of the
# others), and fails if any did.
# `gtest_shards BIN ARGS...` starts BIN as $(nproc) shards (GTEST_SHARD_INDEX):
# for the test binaries whose tests ctest runs side by side anyway.
parallel_dir=$(mktemp -d /tmp/pacset-test-jobs.XXXXXX)
parallel_names=()
parallel_pids=()
parallel_start() {
  local name=$1 pid running
  shift
  while :; do
    running=()
    for pid in "${parallel_pids[@]}"; do kill -0 "$pid" 2>/dev/null && running+=("$pid"); done
    [ ${#running[@]} -lt "$(nproc)" ] && break
    wait -n "${running[@]}" || true
  done
  parallel_names+=("$name")
  ( rc=0; "$@" >"$parallel_dir/$name.log" 2>&1 || rc=$?; echo "$rc" >"$parallel_dir/$name.rc" ) &
  parallel_pids+=($!)
}
parallel_wait() {
  [ ${#parallel_pids[@]} -eq 0 ] || wait "${parallel_pids[@]}" || true
  local name failed=0
  for name in "${parallel_names[@]}"; do
    if [ "$(cat "$parallel_dir/$name.rc" 2>/dev/null)" != 0 ]; then
      echo "FAILED: $name (exit $(cat "$parallel_dir/$name.rc" 2>/dev/null || echo '?'))"
      cat "$parallel_dir/$name.log"
      failed=1
    else
      echo "ok: $name: $(tail -n 1 "$parallel_dir/$name.log")"
    fi
    rm -f "$parallel_dir/$name.log" "$parallel_dir/$name.rc"
  done
  parallel_names=()
  parallel_pids=()
  return $failed
}
gtest_shards() {
  local bin=$1 i n
  shift
  n=$(nproc)
  for ((i = 0; i < n; i++)); do
    parallel_start "$(basename "$bin")-shard$i" env GTEST_TOTAL_SHARDS="$n" GTEST_SHARD_INDEX="$i" \
      "$bin" --gtest_brief=1 "$@"
  done
}

# A build in the background at idle priority (SCHED_IDLE, the idle I/O class),
# in a process group of its own: it takes only the CPU that the tests running
# meanwhile leave (most of them wait on mounts, daemons and child processes).
# `idle_build_start NAME SCRIPT` runs the bash SCRIPT; `idle_build_wait NAME`
# waits for it, then it has the machine to itself; its output is printed
# then. Killed with the script.
declare -A idle_build_pids=()
idle_build_start() {
  setsid chrt --idle 0 ionice -c 3 bash -euo pipefail -c "$2" >"$parallel_dir/build-$1.log" 2>&1 &
  idle_build_pids[$1]=$!
}
idle_build_wait() {
  local rc=0
  wait "${idle_build_pids[$1]}" || rc=$?
  unset "idle_build_pids[$1]"
  cat "$parallel_dir/build-$1.log"
  [ $rc -eq 0 ] || echo "FAILED: the $1 build (exit $rc)"
  return $rc
}
kill_idle_builds() {
  local pid
  for pid in "${idle_build_pids[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
}

SANITIZER_FLAGS=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DPACSET_BUILD_BENCHMARKS=OFF
  -DPACSET_BUILD_PYTHON=OFF)

stage "install dependencies"
bash scripts/install-deps.sh
stage "format and layers"
bash scripts/check-format.sh
bash scripts/check-layers.sh
# The tests' build keeps line tables only (-g1, as the sanitizer builds):
# enough for a failure's backtrace, and a third less compile time than -g
# (27.5 against 19.0 s for tests/fs_mount_test.cc); -g changes no code.
stage "build (gcc, RelWithDebInfo, -g1)"
bash scripts/build.sh "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
# The sanitizer builds start at idle priority during the tests before them
# (the ASan build during ctest, the TSan build during the ASan tests).
if [ "${PACSET_SKIP_SANITIZERS:-0}" != 1 ]; then
  idle_build_start asan "CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja ${SANITIZER_FLAGS[*]@Q} \
      -DPACSET_SANITIZE=address,undefined -DPACSET_FUZZ=ON >/dev/null
    cmake --build build-asan -j$(nproc)"
fi
stage "tests (ctest)"
(cd build && ctest --output-on-failure -j2 --timeout 1200)
if [ "${PACSET_SKIP_SANITIZERS:-0}" != 1 ]; then
  stage "sanitizer build (clang: address, undefined, fuzzer coverage, -Wthread-safety): what is left"
  idle_build_wait asan
  idle_build_start tsan "cmake -S . -B build-tsan -G Ninja ${SANITIZER_FLAGS[*]@Q} \
      -DPACSET_SANITIZE=thread >/dev/null
    cmake --build build-tsan -j$(nproc) --target pacset_store_tests pacset_trace_tests \
      pacset_fs_tests pacset_fs_mount_tests pacset pacsetfs pacset-trace"
  stage "sanitizer tests (address, undefined)"
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  # Side by side what ctest runs side by side; alone what it runs alone
  # (RUN_SERIAL in tests/CMakeLists.txt: the tests on real mounts).
  export ASAN_OPTIONS=detect_leaks=1
  for t in pacset_unit_tests pacset_store_tests pacset_trace_tests pacset_fs_tests; do
    gtest_shards build-asan/tests/$t
  done
  # Issue 31's crafted forests through the command line, under the sanitizers.
  parallel_start hostile_pac_test /usr/bin/python3 tests/security/hostile_pac_test.py \
    --pacset build-asan/tools/pacset
  parallel_wait
  build-asan/tests/pacset_fs_mount_tests --gtest_brief=1
  # The daemon and the engine under the sanitizers, on real mounts.
  ASAN_OPTIONS=detect_leaks=0 /usr/bin/python3 tests/fs/fs_test.py \
    --pacset build-asan/tools/pacset --pacsetfs build-asan/tools/pacsetfs
  unset ASAN_OPTIONS

  if [ "${PACSET_SKIP_FUZZ:-0}" != 1 ]; then
    stage "fuzz: replay fuzz/regression, then 30 s a target (build-asan)"
    PACSET_FUZZ_BUILD_DIR=build-asan bash scripts/fuzz.sh 30
  fi

  stage "ThreadSanitizer build: store, fs and trace tests, the tools: what is left"
  idle_build_wait tsan
  stage "ThreadSanitizer tests"
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp"
  for t in pacset_fs_tests pacset_store_tests pacset_trace_tests; do
    gtest_shards build-tsan/tests/$t
  done
  parallel_wait
  build-tsan/tests/pacset_fs_mount_tests --gtest_brief=1
  /usr/bin/python3 tests/fs/fs_test.py --pacset build-tsan/tools/pacset \
    --pacsetfs build-tsan/tools/pacsetfs
  /usr/bin/python3 tests/fs/trace_test.py --pacset build-tsan/tools/pacset \
    --pacsetfs build-tsan/tools/pacsetfs --pacset-trace build-tsan/tools/pacset-trace
elif [ "${PACSET_SKIP_FUZZ:-0}" != 1 ]; then
  stage "fuzz: replay fuzz/regression, then 30 s a target"
  bash scripts/fuzz.sh 30
fi
