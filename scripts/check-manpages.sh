#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The tools' command lines against their man pages and the exit-code
# convention (issue 30):
#  - every program "make install" puts in bin/ or sbin/ has a man page
#    that make install installs too;
#  - the page names exactly the long options the tool's --help names
#    (and each command's --help, where a tool has commands);
#  - --version prints "TOOL VERSION" (the VERSION file) and exits 0;
#  - an unknown option, a missing required option or a bad value exits 2,
#    a failure at run time exits 1.
# What make install would do is read from "make -n", so a new tool or a
# page installed from somewhere new is checked without editing this
# script; only how to call a tool (its commands, its cases below) is
# written here, and an installed tool missing from that table fails.
# It runs the tools built in the tree: no root, no kernel module.
#
#   scripts/check-manpages.sh   one line per problem, naming the tool and
#                               the option; exits 1 if there is any
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
version=$(cat VERSION)
bad=0

problem() {
	echo "$*"
	bad=1
}

# The commands whose --help is read besides the tool's own.
declare -A commands=(
	[mercury-place]="place compare pipe pipedream bench"
	[mercury-sim]=""
	[mercury-ps]="server worker profile"
	[mercuryctl]="add change replace delete show stats check apply"
	[mercury-run]=""
)

# "EXIT TOOL ARGS": one usage error of each kind and one failure per tool.
# None of them needs privilege, a device or the module.
cases=(
	"2 mercury-place --profile x"
	"2 mercury-place --levels 0 --profile x --cluster y"
	"1 mercury-place --profile /nonexistent --cluster /nonexistent"
	"2 mercury-sim --workers 4"
	"2 mercury-sim --profile x --workers 0"
	"1 mercury-sim --profile /nonexistent"
	"2 mercury-ps worker --profile x"
	"2 mercury-ps server --profile x --workers 0"
	"1 mercury-ps profile --profile /nonexistent --bytes-scale 0.5 --out $tmp/p.json"
	"2 mercuryctl add"
	"2 mercuryctl add lo levels 0"
	"1 mercuryctl check lo plan /nonexistent"
	"2 mercuryctl apply --remove"
	"1 mercuryctl apply -c /nonexistent"
	"2 mercury-run -t 1"
	"2 mercury-run -t 1 --mask 0 -- true"
	"1 mercury-run -t 1 -s dscp --preload /nonexistent -- true"
)

# What make install would install, without installing it: "make -n"
# still runs the sub-makes (their lines name $(MAKE)), dry as well.
dest=$tmp/dest
if ! make -n install-userspace DESTDIR="$dest" > "$tmp/install.log" 2>&1; then
	echo "make -n install-userspace failed:"
	sed 's/^/  /' "$tmp/install.log" | tail -n 20
	exit 1
fi
# Programs: "TOOL DIR", DIR the directory of the make that installs it.
awk -v dest="$dest" '
	/Entering directory/ { d = $NF; gsub(/[\047`]/, "", d); dirs[++depth] = d }
	/Leaving directory/ { d = dirs[--depth] }
	$1 == "install" && index($NF, dest) == 1 && $NF ~ /\/s?bin\/[^\/]*$/ {
		n = split($NF, p, "/"); name = p[n]
		if (name == "") { n = split($(NF - 1), p, "/"); name = p[n] }
		print name, d
	}' "$tmp/install.log" | sort -u > "$tmp/programs"
# Man pages: those the tools' own makes install, and the top Makefile's
# MAN_PAGES (a shell loop that make -n prints but does not expand).
# shellcheck disable=SC2016 # $(MAN_PAGES) is for make, not the shell
sed -n "s|^install .*$dest.*/man[1-8]/\([^/ ]*\)$|\1|p" "$tmp/install.log" > "$tmp/pages"
printf 'print-man-pages:\n\t@echo $(MAN_PAGES)\n' |
	make -s --no-print-directory -f Makefile -f - print-man-pages 2>/dev/null |
	tr ' ' '\n' | sed -n 's|.*/||p' >> "$tmp/pages"
[ -s "$tmp/programs" ] || problem "make -n install-userspace installs no program (parse error?)"

# The long options a text names, one per line.
long_opts() {
	grep -oE -- '--[a-z][a-z0-9]*(-[a-z0-9]+)*' | sort -u
}

# A man page as the text it renders to, near enough for long_opts.
man_text() {
	sed -e '/^\.\\"/d' -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' \
	    -e 's/\\f([A-Z][A-Z]//g' -e 's/\\&//g' "$1"
}

while read -r tool dir; do
	bin=$dir/$tool
	if [ -z "${commands[$tool]+set}" ]; then
		problem "$tool: installed, but scripts/check-manpages.sh does not know how to call it"
		continue
	fi
	if ! make -s -C "$dir" "$tool" > "$tmp/build.log" 2>&1 || [ ! -x "$bin" ]; then
		problem "$tool: does not build in $dir"
		sed 's/^/  /' "$tmp/build.log" | tail -n 10
		continue
	fi

	# --version and an unknown option, on the tool and on each command
	out=$("$bin" --version 2>&1 < /dev/null)
	rc=$?
	out=${out%%$'\n'*}
	[ $rc = 0 ] && [ "$out" = "$tool $version" ] ||
		problem "$tool: --version printed '$out' (exit $rc), not '$tool $version' (exit 0)"
	# $c unquoted: the tool itself is the empty command, no argument
	# shellcheck disable=SC2086
	for c in "" ${commands[$tool]}; do
		"$bin" $c --no-such-option > /dev/null 2>&1 < /dev/null
		rc=$?
		[ $rc = 2 ] || problem "$tool${c:+ $c}: --no-such-option exits $rc, not 2"
	done

	# the options --help names (each command's too), against the page's
	: > "$tmp/help"
	# shellcheck disable=SC2086
	for c in "" ${commands[$tool]}; do
		if ! "$bin" $c --help >> "$tmp/help" 2>&1 < /dev/null; then
			problem "$tool${c:+ $c}: --help exits non-zero"
		fi
	done
	page=""
	for f in $(grep -xE "$tool\.[1-8]" "$tmp/pages"); do
		page=$(find Documentation tc-plugin userspace -name "$f" -not -path '*/build/*' | head -n 1)
	done
	if [ -z "$page" ]; then
		problem "$tool: no man page installed (want $tool.1 or $tool.8)"
		continue
	fi
	long_opts < "$tmp/help" > "$tmp/help.opts"
	man_text "$page" | long_opts > "$tmp/man.opts"
	for o in $(comm -23 "$tmp/help.opts" "$tmp/man.opts"); do
		problem "$tool: $o is in --help but not in $page"
	done
	for o in $(comm -13 "$tmp/help.opts" "$tmp/man.opts"); do
		problem "$tool: $o is in $page but not in --help"
	done
done < "$tmp/programs"

# Usage errors exit 2, failures 1 (the tools listed in cases above).
for c in "${cases[@]}"; do
	set -- $c
	want=$1 tool=$2
	shift 2
	dir=$(awk -v t="$tool" '$1 == t { print $2 }' "$tmp/programs")
	if [ -z "$dir" ]; then
		[ "${unknown:-}" = "$tool" ] ||
			problem "$tool: has exit-code cases here but make install does not install it"
		unknown=$tool
		continue
	fi
	[ -x "$dir/$tool" ] || continue		# reported above
	"$dir/$tool" "$@" > /dev/null 2>&1 < /dev/null
	rc=$?
	[ $rc = "$want" ] || problem "$tool $*: exits $rc, not $want"
done
exit $bad
