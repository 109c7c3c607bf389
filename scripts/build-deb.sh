#!/usr/bin/env bash
# Builds the Debian package without touching the checkout: the sources of HEAD
# (git archive) go to build/deb/pacsetfs-VERSION/, packaging/debian is copied
# to debian/ there, dpkg-buildpackage -b builds, and the .deb files land in
# build/ (or --out DIR). Install with: apt-get install ./build/pacsetfs_*.deb
#
# usage: scripts/build-deb.sh [--worktree] [--out DIR] [--keep] [-- DPKG_BUILDPACKAGE_ARGS...]
#   --worktree  package the working tree (tracked files as they are now, plus
#               untracked files that are not ignored) instead of HEAD
#   --out DIR   where to put the .deb, .buildinfo and .changes (default build/)
#   --keep      keep the unpacked build tree build/deb/pacsetfs-VERSION/
# DEB_BUILD_OPTIONS is honoured (nocheck skips the smoke test of debian/rules).
# Exit status: 0 built, 1 failure, 2 usage error.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

usage() { sed -n '8,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
die() { echo "build-deb: error: $*" >&2; exit 1; }

source_kind=HEAD
out=$root/build
keep=false
while [ $# -gt 0 ]; do
  case $1 in
    --worktree) source_kind=worktree ;;
    --out) [ $# -ge 2 ] || usage; out=$(mkdir -p "$2" && cd "$2" && pwd); shift ;;
    --keep) keep=true ;;
    --) shift; break ;;
    -h | --help) usage ;;
    *) echo "build-deb: unknown argument $1" >&2; usage ;;
  esac
  shift
done

for tool in git dpkg-buildpackage dh dpkg-parsechangelog; do
  command -v "$tool" >/dev/null ||
    die "$tool is missing: apt-get install git dpkg-dev debhelper (or run scripts/install-deps.sh)"
done
git rev-parse --git-dir >/dev/null 2>&1 || die "$root is not a git checkout"

# One version, said twice: CMake's project() and the Debian changelog.
version=$(sed -n 's/^project(pacsetfs VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
[ -n "$version" ] || die "cannot find 'project(pacsetfs VERSION x.y.z' in CMakeLists.txt"
deb_version=$(dpkg-parsechangelog -l packaging/debian/changelog -S Version)
[ "$deb_version" = "$version" ] ||
  die "CMakeLists.txt says version $version but packaging/debian/changelog says $deb_version" \
      "(add a changelog entry: dch -c packaging/debian/changelog -v $version)"

staging=$root/build/deb
src=$staging/pacsetfs-$version
rm -rf "$src"
mkdir -p "$src"
if [ "$source_kind" = HEAD ]; then
  git archive --format=tar HEAD | tar -x -C "$src"
else
  # Deleted-but-tracked files are listed too; keep only what exists.
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf - | tar -x -C "$src"
fi
[ -d "$src/packaging/debian" ] || die "packaging/debian is not in the $source_kind sources (commit it, or use --worktree)"
cp -a "$src/packaging/debian" "$src/debian"

echo "build-deb: building pacsetfs $version from $source_kind in $src"
(cd "$src" && dpkg-buildpackage -us -uc -b -j"$(nproc)" "$@")

# dpkg-buildpackage writes next to the source tree; move the results to $out.
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
results=("$staging"/pacsetfs_"$version"_"$arch".deb "$staging"/python3-pacset_"$version"_"$arch".deb
         "$staging"/pacsetfs-dbgsym_"$version"_"$arch".deb
         "$staging"/python3-pacset-dbgsym_"$version"_"$arch".deb
         "$staging"/pacsetfs_"$version"_"$arch".buildinfo "$staging"/pacsetfs_"$version"_"$arch".changes)
for r in "${results[@]:0:2}"; do
  [ -f "$r" ] || die "dpkg-buildpackage did not produce $r"
done
rm -f "$out"/pacsetfs_*.deb "$out"/pacsetfs-dbgsym_*.deb "$out"/pacsetfs_*.buildinfo "$out"/pacsetfs_*.changes \
  "$out"/python3-pacset_*.deb "$out"/python3-pacset-dbgsym_*.deb
for f in "${results[@]}"; do
  [ -f "$f" ] && mv "$f" "$out/"
done
$keep || rm -rf "$src"
echo "build-deb: $out/pacsetfs_${version}_${arch}.deb $out/python3-pacset_${version}_${arch}.deb"
