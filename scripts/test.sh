#!/usr/bin/env bash
# Installs what the tests need, builds, and runs every test (unit, exactness
# against the real XGBoost and scikit-learn, FUSE mounts, stores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
cd build
ctest --output-on-failure -j2 --timeout 1200
