#!/usr/bin/env bash
# Bash completion of the installed package, with the installed programs:
# subcommands, options, option values, forest names from the default store,
# mounted pacsetfs mount points. Run by deb_install_test.sh while a forest
# NAME is imported and MOUNTPOINT is a pacsetfs mount.
# usage: completion_check.sh NAME MOUNTPOINT
# Exit status: 0 pass, 1 a completion is wrong (the message shows it).
set -uo pipefail
name=$1 mountpoint=$2
source /usr/share/bash-completion/bash_completion
source /usr/share/bash-completion/completions/pacset

# complete LINE: what TAB offers at the end of LINE, one per line.
complete_line() {
    local line=$1
    COMP_LINE=$line
    COMP_POINT=${#line}
    read -ra COMP_WORDS <<<"$line"
    [[ $line == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _pacset "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}" 2>/dev/null
    printf '%s\n' "${COMPREPLY[@]}"
}
status=0
expect() {
    local line=$1 want=$2 got
    got=$(complete_line "$line" | sort | tr '\n' ' ')
    if [[ " $got" != *" $want "* ]]; then
        echo "completion of '$line' offers [$got], not '$want'" >&2
        status=1
    fi
}
# The installed links: bash-completion loads the script under each name.
for p in pacset pacsetfs; do
    [ -e /usr/share/bash-completion/completions/$p ] || { echo "no completion for $p" >&2; status=1; }
done

expect "pacset im" import
expect "pacset import x --la" --layout
expect "pacset import x --layout bin-b" bin-block-wdfs
expect "pacset pack m --format sk" sklearn-pickle
expect "pacset layout-report m --layouts bfs,d" bfs,dfs
expect "pacset pack m --trees-per-bin f" fit
expect "pacset rm debtest" "$name"
expect "pacset export --store rocksdb:/var/lib/pacsetfs/store debtest" "$name"
expect "pacsetfs u" unmount
expect "pacsetfs mount /tmp -o allow_other,cache_s" allow_other,cache_size=
expect "pacsetfs unmount " "$mountpoint"
expect "pacsetfs drop-cache $mountpoint debtest" "$name"
if [ -x /usr/bin/pacset-trace ]; then
    [ -e /usr/share/bash-completion/completions/pacset-trace ] || { echo "no completion for pacset-trace" >&2; status=1; }
    expect "pacset-trace rep" report
    expect "pacset-trace record --mount " "$mountpoint"
    expect "pacset-trace mark b" begin
    expect "pacset-trace record -o t -- pacset pre" predict
fi
exit $status
