#!/usr/bin/env bash
# The Debian package, used the way an administrator would:
#
#   build the .debs (scripts/build-deb.sh: pacsetfs and python3-pacset),
#   lintian them, apt-get install them,
#   then with the installed programs only (/usr/bin, /usr/sbin; never the
#   build tree): train a real scikit-learn model with Debian's python3-sklearn,
#   pack it, import it into the default store, mount the store with
#   `mount -t fuse.pacsetfs` as an /etc/fstab line would (and through a real
#   /etc/fstab line and `mount DIR`, and with the systemd unit's command),
#   predict through the mount and compare with predicting from the model
#   file (with `pacset predict` and with the installed Python package:
#   `import pacset` from /usr/bin/python3), unmount, apt-get purge, and check
#   that nothing is left behind but
#   the documented user state (the default store /var/lib/pacsetfs/store).
#   A second install + purge without user state must leave nothing at all.
#
# usage: deb_install_test.sh [--deb FILE]     (default: build one from the working tree;
#        python3-pacset_*.deb is taken from FILE's directory)
#
# It installs and purges a package system-wide and edits /etc/fstab (always
# restored), so it is meant for CI machines. It refuses to run where pacsetfs
# is installed from elsewhere; it cleans up (unmount, fstab line, purge) even
# when it fails. Needs root and /dev/fuse: exit 77 (skipped) without them.
# Exit status: 0 pass, 1 failure, 2 usage error, 77 skipped.
set -euo pipefail
export LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive
# Only the installed programs: nothing from the build tree or a pyenv on PATH.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
unset PACSET_STORE PACSET_SKLEARN_EXPORTER PACSET_PYTHON
repo=$(cd "$(dirname "$0")/../.." && pwd)

deb=
while [ $# -gt 0 ]; do
  case $1 in
    --deb) [ $# -ge 2 ] || { echo "usage: $0 [--deb FILE]" >&2; exit 2; }; deb=$(realpath "$2"); shift ;;
    *) echo "usage: $0 [--deb FILE]" >&2; exit 2 ;;
  esac
  shift
done

t0=$SECONDS
step() { printf '== [%4ds] %s\n' $((SECONDS - t0)) "$*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

[ "$(id -u)" -eq 0 ] || skip "needs root (installs a package, mounts FUSE)"
[ -c /dev/fuse ] || skip "needs /dev/fuse"
/usr/bin/python3 -c 'import sklearn, joblib, numpy' 2>/dev/null ||
  fail "/usr/bin/python3 cannot import sklearn/joblib/numpy: apt-get install python3-sklearn (scripts/install-deps.sh)"

# A pacsetfs package on this machine that this test did not install is
# someone's real installation: leave it alone. One this test installed (the
# marker says so) is a leftover of a run that was killed: purge it.
marker=/var/tmp/pacsetfs-deb-test.installed
# "installed", "config-files", ...; "" or "not-installed" when dpkg does not have it.
pkg_status() { dpkg-query -W -f='${db:Status-Status}' pacsetfs 2>/dev/null || true; }
pkg_known() { local s; s=$(pkg_status); [ -n "$s" ] && [ "$s" != not-installed ]; }
if pkg_known; then
  if [ -f "$marker" ]; then
    echo "purging the pacsetfs package that a killed run of this test left behind"
    apt-get purge -y -q pacsetfs python3-pacset >/dev/null
    # The marker says whether that run created /var/lib/pacsetfs.
    grep -qx 'created-state=yes' "$marker" && rm -rf /var/lib/pacsetfs
    rm -f "$marker"
  else
    fail "a pacsetfs package is already on this machine ($(pkg_status)); this test installs and purges it" \
         "system-wide, so it will not run here (apt-get purge pacsetfs first, or run it in CI)"
  fi
fi

work=$(mktemp -d /tmp/pacsetfs-debtest.XXXXXX)
chmod 755 "$work"  # user nobody checks allow_other through it
name=debtest-$$
state_preexisted=false
[ -e /var/lib/pacsetfs ] && state_preexisted=true
mounts=("$work/mnt-type" "$work/mnt-fstab" "$work/mnt-unit")
fstab_line="pacsetfs $work/mnt-fstab fuse.pacsetfs ro,allow_other,nofail,_netdev 0 0"
daemon_pid=
installed_by_us=false
imported=false

reload_systemd() { [ -d /run/systemd/system ] && systemctl daemon-reload || true; }
remove_fstab_line() {
  if grep -qxF -- "$fstab_line" /etc/fstab; then
    # Rewrite in place (keeps owner, mode and inode), dropping only our line.
    awk -v ours="$fstab_line" '$0 != ours' /etc/fstab >"$work/fstab.new"
    cat "$work/fstab.new" >/etc/fstab
    reload_systemd
  fi
}
cleanup() {
  local rc=$?
  set +e
  for m in "${mounts[@]}"; do
    mountpoint -q "$m" 2>/dev/null && { umount "$m" || umount -l "$m"; }
  done
  [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null && kill -TERM "$daemon_pid"
  remove_fstab_line
  if $imported && [ -x /usr/bin/pacset ]; then /usr/bin/pacset rm "$name" >/dev/null 2>&1; fi
  if $installed_by_us && pkg_known; then apt-get purge -y -q pacsetfs python3-pacset >/dev/null 2>&1; fi
  # The default store this test created (never one that was there before).
  $state_preexisted || rm -rf /var/lib/pacsetfs
  rm -f "$marker"
  rm -rf "$work"
  [ $rc -eq 0 ] && echo "PASS ($((SECONDS - t0)) s)" || echo "deb_install_test: FAILED (rc $rc)" >&2
  exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# ---------------------------------------------------------------- build
if [ -z "$deb" ]; then
  step "building the .deb (scripts/build-deb.sh --worktree, without debug information)"
  mkdir -p "$work/out"
  # -g0 after dpkg-buildflags' -g: the same code (debug information changes
  # none), no -dbgsym packages, which this test does not install, and a
  # third less compile time on CI's critical path (this test runs alone).
  if ! DEB_CFLAGS_APPEND=-g0 DEB_CXXFLAGS_APPEND=-g0 \
       bash "$repo/scripts/build-deb.sh" --worktree --out "$work/out" >"$work/build.log" 2>&1; then
    tail -50 "$work/build.log" >&2
    fail "scripts/build-deb.sh failed (log above)"
  fi
  deb=$(ls "$work"/out/pacsetfs_*.deb)
  step "built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"
fi
[ -f "$deb" ] || fail "no package at $deb"
pydeb=$(ls "$(dirname "$deb")"/python3-pacset_*.deb 2>/dev/null | head -1)
[ -f "$pydeb" ] || fail "no python3-pacset package next to $deb"

# The programs link RocksDB, liburing and libstdc++ in (CMakeLists.txt): the
# package names their sources, as Debian policy 7.8 asks.
static_built_using=$(dpkg-deb -f "$deb" Static-Built-Using)
for src in rocksdb liburing; do
  grep -qE "(^|, )$src \(= [^)]+\)" <<<"$static_built_using" ||
    fail "Static-Built-Using does not name $src: '$static_built_using'"
done

step "lintian"
command -v lintian >/dev/null || fail "lintian is missing: apt-get install lintian"
# Fails on errors and warnings; the overrides in packaging/debian say why the rest stays.
lintian_rc=0
lintian --fail-on error,warning "$deb" "$pydeb" >"$work/lintian.log" 2>&1 || lintian_rc=$?
grep -v 'running with root privileges' "$work/lintian.log" || true
[ $lintian_rc -eq 0 ] || fail "lintian reports errors or warnings (exit $lintian_rc)"

# Every program has a man page; the compiled ones have bash completion.
contents=$(dpkg-deb -c "$deb" | awk '{print substr($6, 2)}')
for prog in $(grep -E '^/usr/s?bin/[^/]+$' <<<"$contents"); do
  p=${prog##*/}
  grep -qE "^/usr/share/man/man[1-8]/$p\.[1-8]\.gz$" <<<"$contents" || fail "no man page for $prog in the package"
done
for prog in $(grep -E '^/usr/bin/pacset[^/]*$' <<<"$contents" | grep -v sklearn-export); do
  grep -qx "/usr/share/bash-completion/completions/${prog##*/}" <<<"$contents" ||
    fail "no bash completion for $prog"
done
for f in /usr/sbin/mount.fuse.pacsetfs /lib/systemd/system/pacsetfs@.service /var/lib/pacsetfs/; do
  grep -qx -- "$f" <<<"$contents" || fail "$f is not in the package"
done
# The store backends are plugins where the programs look for them
# (store/internal/backend_plugin.h); the import and mounts below load them.
for backend in rocksdb redis; do
  grep -qE "^/usr/lib/[^/]+/pacset/store-$backend\.so$" <<<"$contents" ||
    fail "/usr/lib/MULTIARCH/pacset/store-$backend.so is not in the package"
done

# ---------------------------------------------------------------- install
# What the file system holds before, to compare with after the purge.
# The checkout is pruned wherever it is: builds may run in it meanwhile
# (scripts/test.sh builds the sanitizer trees while the tests run).
snapshot() {
  find /etc /usr /opt /srv /var -xdev \
    \( -path "$repo" -o -path /var/lib/dpkg -o -path /var/lib/apt -o -path /var/cache -o -path /var/log \
       -o -path /var/tmp -o -path /var/lib/systemd/timers -o -path /var/lib/man-db \) -prune \
    -o -print 2>/dev/null | sort
}
step "snapshot of /etc /usr /opt /srv /var"
snapshot >"$work/before.txt"

step "apt-get install $(basename "$deb") $(basename "$pydeb")"
$state_preexisted && echo created-state=no >"$marker" || echo created-state=yes >"$marker"
installed_by_us=true
apt-get install -y -q "$deb" "$pydeb" >"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; fail "apt-get install failed"; }
dpkg-query -W -f='${db:Status-Status}' python3-pacset | grep -qx installed || fail "python3-pacset is not installed"
[ "$(pkg_status)" = installed ] || fail "pacsetfs is not installed after apt-get install ($(pkg_status))"
for p in /usr/bin/pacset /usr/bin/pacsetfs /usr/bin/pacset-sklearn-export; do
  [ -x "$p" ] || fail "$p is missing"
done
[ -d /var/lib/pacsetfs ] || fail "/var/lib/pacsetfs was not created"
[ "$(readlink -f /usr/sbin/mount.fuse.pacsetfs)" = "$(readlink -f /sbin/mount.fuse3)" ] ||
  fail "/usr/sbin/mount.fuse.pacsetfs does not lead to mount.fuse3"
/usr/bin/pacset --version | grep -q '^pacset ' || fail "pacset --version"
/usr/bin/pacsetfs --version | grep -q '^pacsetfs ' || fail "pacsetfs --version"
if command -v systemd-analyze >/dev/null; then
  # Verify an instance of the template as systemd would load it.
  mkdir -p "$work/units"
  cp /lib/systemd/system/pacsetfs@.service "$work/units/pacsetfs@srv-forests.service"
  systemd-analyze verify --man=no "$work/units/pacsetfs@srv-forests.service" ||
    fail "systemd-analyze verify rejects pacsetfs@.service"
fi

# ---------------------------------------------------------------- a real model
step "training a random forest with /usr/bin/python3 (Debian's scikit-learn)"
/usr/bin/python3 - "$work" <<'PY'
import sys
import joblib
import numpy as np
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier

work = sys.argv[1]
X, y = make_classification(n_samples=3000, n_features=16, n_informative=10, n_classes=3,
                           random_state=7)
rf = RandomForestClassifier(n_estimators=40, max_depth=10, random_state=7).fit(X[:2500], y[:2500])
joblib.dump(rf, f"{work}/forest.joblib")
rows = X[2500:].copy()
np.savetxt(f"{work}/rows.csv", rows, delimiter=",", header=",".join(f"f{i}" for i in range(16)),
           comments="", fmt="%.17g")
np.savetxt(f"{work}/sklearn.csv", rf.predict_proba(rows), delimiter=",", fmt="%.17g")
PY

step "pacset pack (runs /usr/bin/pacset-sklearn-export)"
cd "$work"
/usr/bin/pacset pack forest.joblib -o forest.pac --block-size 4KiB
/usr/bin/pacset info forest.pac >/dev/null
/usr/bin/pacset predict forest.joblib --input rows.csv --output from-model.csv
/usr/bin/python3 - <<'PY' || fail "pacset's predictions differ from scikit-learn's"
import numpy as np
ours, theirs = np.loadtxt("from-model.csv", delimiter=","), np.loadtxt("sklearn.csv", delimiter=",")
assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
d = np.max(np.abs(ours - theirs))
assert d <= 1e-12, d
PY

step "the installed Python package: import pacset, load the joblib, predict"
(cd / && /usr/bin/python3 - "$work" <<'PY') || fail "the installed python3-pacset"
import sys
import numpy as np
import pacset

work = sys.argv[1]
assert pacset.__file__.startswith("/usr/lib/python3/dist-packages/"), pacset.__file__
rows = np.loadtxt(f"{work}/rows.csv", delimiter=",", skiprows=1)
want = np.loadtxt(f"{work}/sklearn.csv", delimiter=",")
forest = pacset.load(f"{work}/forest.joblib")
assert np.array_equal(forest.predict(rows), want), "pacset.load(joblib).predict != predict_proba"
assert np.array_equal(pacset.open(f"{work}/forest.pac").predict(rows), want)
PY

step "pacset import into the default store"
/usr/bin/pacset import forest.pac --name "$name"
imported=true
[ -d /var/lib/pacsetfs/store ] || fail "the default store is not /var/lib/pacsetfs/store"
/usr/bin/pacset ls | grep -qw "$name" || fail "pacset ls does not list $name"

# Predicts through MOUNTPOINT/NAME.pac and compares with the model file.
check_mount() {
  local mp=$1 how=$2 allow_other=${3:-}
  mountpoint -q "$mp" || fail "$how: nothing mounted on $mp"
  local type
  type=$(findmnt -n -o FSTYPE --target "$mp")
  [ "$type" = fuse.pacsetfs ] || fail "$how: $mp has type $type, not fuse.pacsetfs"
  cmp forest.pac "$mp/$name.pac" || fail "$how: $mp/$name.pac differs from the packed file"
  /usr/bin/pacset predict "$mp/$name.pac" --input rows.csv --output "through-$how.csv"
  cmp from-model.csv "through-$how.csv" || fail "$how: predictions through the mount differ from the model's"
  /usr/bin/python3 -c "import sys, numpy as np, pacset
rows = np.loadtxt('rows.csv', delimiter=',', skiprows=1)
assert np.array_equal(pacset.open(sys.argv[1]).predict(rows), np.loadtxt('from-model.csv', delimiter=','))" \
    "$mp/$name.pac" || fail "$how: pacset.open through the mount does not predict what the model does"
  if [ -n "$allow_other" ]; then
    runuser -u nobody -- cat "$mp/$name.pac" >/dev/null || fail "$how: allow_other, yet user nobody cannot read"
  fi
}
wait_unmounted() {
  local i
  for i in $(seq 100); do mountpoint -q "$1" || return 0; sleep 0.1; done
  fail "$1 is still mounted"
}
mkdir -p "${mounts[@]}"

step "mount -t fuse.pacsetfs rocksdb:/var/lib/pacsetfs/store DIR -o ro,allow_other,nofail,_netdev"
# What mount(8) does for an fstab line with that type; the libmount debug log
# shows which helper it ran.
LIBMOUNT_DEBUG=cxt mount -t fuse.pacsetfs -o ro,allow_other,nofail,_netdev \
  rocksdb:/var/lib/pacsetfs/store "$work/mnt-type" 2>"$work/libmount.log" ||
  { grep -v libmount "$work/libmount.log" >&2; fail "mount -t fuse.pacsetfs failed"; }
grep -q 'executing helper /sbin/mount.fuse.pacsetfs' "$work/libmount.log" ||
  fail "mount(8) did not run /sbin/mount.fuse.pacsetfs: $(grep -o 'executing helper.*' "$work/libmount.log")"
check_mount "$work/mnt-type" mount-t allow_other
# A read-only mount disables the control file, with an error that says so.
if [ -x /usr/bin/pacset-trace ]; then
  ! /usr/bin/pacset-trace record --mount "$work/mnt-type" -o ro.trace -- true 2>ro.err ||
    fail "pacset-trace record worked on a read-only mount"
  grep -q "read-only" ro.err || fail "pacset-trace on a read-only mount: $(cat ro.err)"
fi
umount "$work/mnt-type"
wait_unmounted "$work/mnt-type"

step "an /etc/fstab line, then mount DIR"
printf '%s\n' "$fstab_line" >>/etc/fstab
reload_systemd
mount "$work/mnt-fstab" || fail "mount $work/mnt-fstab (from /etc/fstab) failed"
check_mount "$work/mnt-fstab" fstab allow_other

if [ -x /usr/bin/pacset-trace ]; then
  step "pacset-trace record + report through a read-write mount (pacsetfs mount DIR -o allow_other)"
  /usr/bin/pacsetfs mount "$work/mnt-type" -o allow_other || fail "pacsetfs mount $work/mnt-type"
  /usr/bin/pacset-trace record --mount "$work/mnt-type" --cold -o run.trace -- \
    /usr/bin/pacset predict "$work/mnt-type/$name.pac" --input rows.csv --output /dev/null ||
    fail "pacset-trace record"
  umount "$work/mnt-type"
  wait_unmounted "$work/mnt-type"
  /usr/bin/pacset-trace report run.trace >report.txt || fail "pacset-trace report"
  grep -q "$name" report.txt || fail "the trace report does not name forest $name: $(head -5 report.txt)"
fi

if [ -f /usr/share/bash-completion/bash_completion ]; then
  step "bash completion (the installed script, the installed programs)"
  bash "$repo/tests/deb/completion_check.sh" "$name" "$work/mnt-fstab" ||
    fail "bash completion"
fi

umount "$work/mnt-fstab"
wait_unmounted "$work/mnt-fstab"
remove_fstab_line

step "the systemd unit pacsetfs@$(systemd-escape --path "$work/mnt-unit").service"
unit=pacsetfs@$(systemd-escape --path "$work/mnt-unit").service
if [ -d /run/systemd/system ]; then
  systemctl start "$unit" || { journalctl -u "$unit" --no-pager | tail -20 >&2; fail "systemctl start $unit"; }
  check_mount "$work/mnt-unit" unit
  systemctl stop "$unit"
  wait_unmounted "$work/mnt-unit"
else
  # No systemd here: run the unit's ExecStart= as systemd would (Type=forking:
  # it returns once mounted), then stop it the way systemd does, with SIGTERM.
  exec_start=$(sed -n 's/^ExecStart=//p' /lib/systemd/system/pacsetfs@.service)
  options=$(sed -n 's/^Environment=PACSETFS_OPTIONS=//p' /lib/systemd/system/pacsetfs@.service)
  cmd=${exec_start//%f/$work/mnt-unit}
  cmd=${cmd//\$\{PACSETFS_OPTIONS\}/$options}
  echo "   (no systemd: running '$cmd')"
  read -ra argv <<<"$cmd"
  "${argv[@]}" || fail "the unit's ExecStart failed: $cmd"
  check_mount "$work/mnt-unit" unit
  daemon_pid=$(pgrep -xf -- "$cmd" | head -1) || true
  [ -n "$daemon_pid" ] || fail "cannot find the daemon of '$cmd'"
  kill -TERM "$daemon_pid"
  wait_unmounted "$work/mnt-unit"
  daemon_pid=
fi

# ---------------------------------------------------------------- purge
/usr/bin/pacset rm "$name"
imported=false
step "apt-get purge pacsetfs (with user state: the default store)"
apt-get purge -y -q pacsetfs python3-pacset >"$work/purge.log" 2>&1 || { cat "$work/purge.log" >&2; fail "apt-get purge failed"; }
! pkg_known || fail "pacsetfs still known to dpkg after purge ($(pkg_status))"
[ -d /var/lib/pacsetfs/store ] || fail "purge removed the default store (the forests a user imported)"
$state_preexisted || grep -q "kept /var/lib/pacsetfs" "$work/purge.log" || fail "purge did not say that it kept /var/lib/pacsetfs"

# Anything new but the store is a leftover, unless another package owns it
# (apt may have pulled in dependencies) or it is a Python bytecode cache
# (running Debian's scikit-learn as root writes those).
leftovers() {
  snapshot >"$work/after.txt"
  comm -13 "$work/before.txt" "$work/after.txt" |
    { grep -v -e '^/var/lib/pacsetfs$' -e '^/var/lib/pacsetfs/store$' -e '^/var/lib/pacsetfs/store/' \
              -e '/__pycache__$' -e '/__pycache__/' || true; } |
    while IFS= read -r path; do
      dpkg -S "$path" >/dev/null 2>&1 || printf '%s\n' "$path"
    done
}
left=$(leftovers)
[ -z "$left" ] || fail "purge left behind: $(head -20 <<<"$left")"

if $state_preexisted; then
  step "(/var/lib/pacsetfs existed before this test: the purge without user state is not checked)"
else
  step "apt-get install + purge without user state: nothing may remain"
  rm -rf /var/lib/pacsetfs
  apt-get install -y -q "$deb" "$pydeb" >"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; fail "second apt-get install failed"; }
  [ -z "$(ls -A /var/lib/pacsetfs)" ] || fail "/var/lib/pacsetfs is not empty after installing"
  apt-get purge -y -q pacsetfs python3-pacset >"$work/purge.log" 2>&1 || { cat "$work/purge.log" >&2; fail "second apt-get purge failed"; }
  [ ! -e /var/lib/pacsetfs ] || fail "/var/lib/pacsetfs is still there after a purge without user state"
  left=$(leftovers)
  [ -z "$left" ] || fail "purge left behind: $(head -20 <<<"$left")"
fi
installed_by_us=false
step "done"
