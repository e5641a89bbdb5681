#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Userspace under faults, under AddressSanitizer and UBSan (make test's
# "faults" suite). A copy of libmercury, mercury-ps, mercuryctl and
# mercury-run (launcher and LD_PRELOAD shim) is built with
# -fsanitize=address,undefined in a scratch directory (the tree's own
# binaries stay as they are), then:
#  1. their unit tests run sanitized: among them the channel set against
#     a closed, a stalled and a full peer, the receiver fed truncated,
#     overlapping and reset streams, mercury-ps with a killed worker, a
#     killed server and a stopped worker, mercuryctl on broken plans, and
#     plain programs (mercury-run's tests/probe, built without sanitizers)
#     run under the sanitized launcher and shim;
#  2. faults.py puts fake peers in front of the sanitized mercury-ps (one
#     that closes at once, stalls, sends garbage, resets mid-frame), as
#     its server and as one of its workers, and in front of the plain
#     probe under the sanitized mercury-run (a server that is not there,
#     closes at once, stalls, sends garbage, resets mid-reply), which must
#     see what it sees without the shim, and in front of libmercury's
#     Python ChannelSet and Receiver (a peer that closes, stalls, sends
#     garbage, resets mid-frame), whose errors must name the peer.
# Any sanitizer report fails the run (exit code 99, never recovered).
# The sanitized shim loads into an unsanitized program with the ASan
# runtime preloaded before it (ASan must be the first library; UBSan's
# runtime has no such rule and comes in as the shim's dependency):
# LD_PRELOAD=libasan.so.N, which mercury-run keeps in front of the shim.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
w=$(mktemp -d /tmp/mercury-faults.XXXXXX)
trap 'rm -rf "$w"' EXIT
n=0
fails=0

ok() { n=$((n + 1)); echo "ok $n $*"; }
nok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n $*"; }

SAN="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"
export ASAN_OPTIONS=exitcode=99:detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=exitcode=99:halt_on_error=1:print_stacktrace=1

# The sources only: what make clean would leave.
(cd "$top" && tar -c --exclude='*.o' --exclude='*.a' --exclude='*.so' \
	--exclude='*.so.*' \
	userspace include scripts VERSION profiles) |
	tar -x -C "$w"
for d in lib sim ps ctl run; do
	make -s -C "$w/userspace/$d" clean > /dev/null 2>&1
done

# Makefiles append their own flags to CFLAGS from the environment.
if CFLAGS="$SAN" make -s -C "$w/userspace/lib" libmercury.a \
	$(cd "$w/userspace/lib" && ls tests/test_*.c | sed 's/\.c$//') > "$w/build-lib.log" 2>&1 &&
   CFLAGS="$SAN" make -s -C "$w/userspace/ps" mercury-ps \
	$(cd "$w/userspace/ps" && ls tests/test_*.c | sed 's/\.c$//') > "$w/build-ps.log" 2>&1 &&
   CFLAGS="$SAN" make -s -C "$w/userspace/ctl" mercuryctl tests/test_ctl > "$w/build-ctl.log" 2>&1 &&
   make -s -C "$w/userspace/run" tests/probe > "$w/build-run.log" 2>&1 &&
   CFLAGS="$SAN" make -s -C "$w/userspace/run" mercury-run libmercury-preload.so \
	tests/test_run >> "$w/build-run.log" 2>&1; then
	ok "sanitized build of libmercury, mercury-ps, mercuryctl and mercury-run"
else
	nok "sanitized build of libmercury, mercury-ps, mercuryctl and mercury-run"
	tail -n 20 "$w"/build-*.log | sed 's/^/# /'
	echo "1..$n"
	exit 1
fi

# The shim's ASan runtime, preloaded into the programs it wraps. The probe
# must stay plain (built first, above): the case is a sanitized shim in a
# program that is not.
run=$w/userspace/run
asan=$(ldd "$run/libmercury-preload.so" | awk '$1 ~ /^libasan\./ { print $3 }')
if [ -n "$asan" ] && ldd "$run/mercury-run" | grep -q '^[[:space:]]*libasan\.' &&
   ! ldd "$run/tests/probe" | grep -q 'san\.'; then
	ok "mercury-run: launcher and shim sanitized ($asan), tests/probe plain"
else
	nok "mercury-run: launcher and shim sanitized, tests/probe plain"
	ldd "$run/libmercury-preload.so" "$run/mercury-run" "$run/tests/probe" | sed 's/^/# /'
fi

# unit tests, sanitized: each test binary is one line here, its own TAP
# lines kept as comments
for t in "$w"/userspace/{lib,ps,ctl,run}/tests/test_*; do
	case $t in *.c|*.o|*.h) continue ;; esac
	[ -x "$t" ] || continue
	name=${t#"$w"/userspace/}
	# from where the component's own "make test" runs it
	case $name in
	ps/*) dir=$(dirname "$t") ;;
	*) dir=$(dirname "$(dirname "$t")") ;;
	esac
	# test_run's programs inherit it: the shim needs ASan loaded first
	preload=
	case $name in run/*) preload=$asan ;; esac
	(cd "$dir" && LD_PRELOAD=$preload CMOCKA_MESSAGE_OUTPUT=TAP "$t") > "$w/t.log" 2>&1
	rc=$?
	if [ $rc = 0 ]; then
		ok "ASan+UBSan: $name: $(grep -c '^ok' "$w/t.log") tests pass"
	else
		nok "ASan+UBSan: $name (exit $rc)"
		grep -E '^not ok|ERROR|error:|runtime error|SUMMARY' "$w/t.log" | head -20 | sed 's/^/# /'
	fi
done

# faults.py WHO ARGS...: its TAP lines, renumbered into ours, with WHO
faults() {
	local who=$1 rc line f0=$fails
	shift
	python3 "$top/selftests/faults/faults.py" "$@" > "$w/faults.log" 2>&1
	rc=$?
	while IFS= read -r line; do
		case $line in
		"ok "*) ok "$who (ASan+UBSan): ${line#ok * }" ;;
		"not ok "*) nok "$who (ASan+UBSan): ${line#not ok * }" ;;
		"#"*) echo "$line" ;;
		esac
	done < "$w/faults.log"
	[ $rc = 0 ] || [ $fails -gt "$f0" ] || nok "faults.py for $who exited $rc"
}

# fake peers in front of the sanitized mercury-ps, and of a plain program
# under the sanitized mercury-run
faults mercury-ps --ps "$w/userspace/ps/mercury-ps" \
	--profile "$top/userspace/ps/tests/fixtures/tiny.json"
faults mercury-run --run "$run/mercury-run" --probe "$run/tests/probe" \
	--asan-runtime "$asan"
# and in front of libmercury's Python binding (ChannelSet, Receiver) over
# the sanitized library, in a plain python3 with the library's ASan
# runtime preloaded
lib=$w/userspace/lib/libmercury.so.0
libasan=$(ldd "$lib" 2>/dev/null | awk '$1 ~ /^libasan\./ { print $3 }')
if [ -n "$libasan" ]; then
	faults "libmercury (Python)" --py-lib "$lib" --py-path "$top/userspace/python" \
		--asan-runtime "$libasan"
else
	nok "libmercury.so.0 is not sanitized (no libasan in ldd $lib)"
fi
echo "1..$n"
[ $fails = 0 ]
