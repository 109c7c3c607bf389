#!/usr/bin/env bash
# Installs everything pacsetfs needs to build, test and run on Debian 12 (as root).
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build pkg-config git clang-format
  clang libclang-rt-14-dev  # scripts/fuzz.sh (libFuzzer, sanitizers)
  fuse3 libfuse3-dev librocksdb-dev libcereal-dev libxxhash-dev libhiredis-dev liburing-dev
  libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev
  redis-server
  # clang -Wthread-safety build of the store, fs and trace libraries (scripts/test.sh)
  clang-14
  iproute2  # tests/fs/scale_test.py: network namespaces as hosts
  python3 python3-numpy python3-xgboost python3-sklearn python3-joblib
  # the Python package (python/) and its tests
  python3-dev pybind11-dev python3-pandas python3-dask python3-distributed python3-pytest
  dataset-fashion-mnist
  # the Debian package: scripts/build-deb.sh, tests/deb
  dpkg-dev debhelper dh-python help2man lintian bash-completion
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}; run as root (or with sudo)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends "${missing[@]}" || {
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
}
