#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The container image's runtime stage installs only `scripts/install-deps
# --runtime` (packaging/Dockerfile). This checks that list against what the
# built binaries really load, both ways:
#   - every shared library a binary needs directly (ELF NEEDED) comes from a
#     listed package, or from one every Debian image has (libc6, libgcc-s1),
#     else the image fails at start;
#   - every listed package provides a library some binary needs, else the
#     image carries dead weight;
#   - ldd resolves every library, direct or indirect.
# Debian packages pull in the libraries their libraries need, so indirect
# dependencies need no listing.
set -euo pipefail

src=${SR_SOURCE_ROOT:?}
bins=("${SR_AGENT:?}" "${SR_GATEWAY:?}")
command -v dpkg-query >/dev/null || { echo "SKIP: not a Debian system (no dpkg-query)"; exit 77; }

# The runtime_pkgs=( ... ) array of scripts/install-deps, without comments.
mapfile -t listed < <(sed -n '/^runtime_pkgs=(/,/^)/p' "$src/scripts/install-deps" |
	sed -e '1d;$d' -e 's/#.*//' | tr -s ' \t' '\n' | sed '/^$/d' | sort -u)
[ ${#listed[@]} -gt 0 ] || { echo "FAIL: no runtime_pkgs list found in scripts/install-deps"; exit 1; }

for b in "${bins[@]}"; do
	# Not `ldd | grep -q`: grep -q exits at the first match, ldd may then die of SIGPIPE, and under
	# pipefail the pipeline fails, so a sanitizer build was sometimes not recognised.
	libs=$(ldd "$b")
	if grep -qE 'lib(a|ub|t|l)san' <<<"$libs"; then
		echo "SKIP: $b is a sanitizer build; its runtime differs from a release build"
		exit 77
	fi
done

# Package owning a library file; usrmerge means dpkg may know it under /lib
# or /usr/lib.
owner() {
	local path=$1 real alt
	real=$(readlink -f "$path")
	for p in "$path" "$real" "${real#/usr}" "/usr$real"; do
		alt=$(dpkg-query -S "$p" 2>/dev/null | head -n 1 | cut -d: -f1) && [ -n "$alt" ] && { echo "$alt"; return; }
	done
	return 1
}

fail=0
declare -A needed_pkgs=()
for b in "${bins[@]}"; do
	name=$(basename "$b")
	libs=$(ldd "$b")
	if grep -q 'not found' <<<"$libs"; then
		echo "FAIL: $name: unresolved libraries:"; ldd "$b" | grep 'not found'
		fail=1
	fi
	declare -A path_of=()
	# "libx.so.1 => /path (0x...)", and the dynamic loader as "/path (0x...)".
	while read -r soname path; do
		[ -n "$path" ] && path_of[$soname]=$path
	done < <(ldd "$b" | awk '$2 == "=>" {print $1, $3} $1 ~ /^\// {n = split($1, p, "/"); print p[n], $1}')
	for soname in $(readelf -d "$b" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
		path=${path_of[$soname]:-}
		if [ -z "$path" ]; then
			echo "FAIL: $name: NEEDED $soname not resolved by ldd"
			fail=1
			continue
		fi
		pkg=$(owner "$path") || { echo "FAIL: $name: no Debian package owns $path ($soname)"; fail=1; continue; }
		needed_pkgs[$pkg]+="$name:$soname "
	done
	unset path_of
done

for pkg in $(printf '%s\n' "${!needed_pkgs[@]}" | sort); do
	if printf '%s\n' "${listed[@]}" | grep -qxF "$pkg"; then
		echo "ok: $pkg (${needed_pkgs[$pkg]% })"
		continue
	fi
	case "$pkg" in
	# glibc and the GCC runtime: dependencies of Essential packages, so in
	# every Debian image, debian:12 included.
	libc6 | libgcc-s1) echo "ok: $pkg (${needed_pkgs[$pkg]% }) is in every Debian image" ;;
	*)
		echo "FAIL: $pkg provides ${needed_pkgs[$pkg]% } but is not in runtime_pkgs of scripts/install-deps"
		fail=1
		;;
	esac
done
for pkg in "${listed[@]}"; do
	if [ -z "${needed_pkgs[$pkg]:-}" ]; then
		echo "FAIL: runtime_pkgs lists $pkg, but no binary needs a library from it (remove it, or it is a dependency the build lost)"
		fail=1
	fi
done

[ $fail = 0 ] && echo "runtime library list matches the binaries (${#listed[@]} packages)"
exit $fail
