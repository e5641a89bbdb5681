#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Userspace under faults, under AddressSanitizer and UBSan (make test's
# "faults" suite). A copy of libmercury, mercury-ps and mercuryctl is
# built with -fsanitize=address,undefined in a scratch directory (the
# tree's own binaries stay as they are), then:
#  1. their unit tests run sanitized: among them the channel set against
#     a closed, a stalled and a full peer, the receiver fed truncated,
#     overlapping and reset streams, mercury-ps with a killed worker, a
#     killed server and a stopped worker, mercuryctl on broken plans;
#  2. faults.py puts fake peers in front of the sanitized mercury-ps (one
#     that closes at once, stalls, sends garbage, resets mid-frame), as
#     its server and as one of its workers.
# Any sanitizer report fails the run (exit code 99, never recovered).
# The LD_PRELOAD shim is left out: a sanitized shim cannot load into the
# unsanitized programs it wraps.
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
for d in lib sim ps ctl; do
	make -s -C "$w/userspace/$d" clean > /dev/null 2>&1
done

# Makefiles append their own flags to CFLAGS from the environment.
if CFLAGS="$SAN" make -s -C "$w/userspace/lib" libmercury.a \
	$(cd "$w/userspace/lib" && ls tests/test_*.c | sed 's/\.c$//') > "$w/build-lib.log" 2>&1 &&
   CFLAGS="$SAN" make -s -C "$w/userspace/ps" mercury-ps \
	$(cd "$w/userspace/ps" && ls tests/test_*.c | sed 's/\.c$//') > "$w/build-ps.log" 2>&1 &&
   CFLAGS="$SAN" make -s -C "$w/userspace/ctl" mercuryctl tests/test_ctl > "$w/build-ctl.log" 2>&1; then
	ok "sanitized build of libmercury, mercury-ps and mercuryctl"
else
	nok "sanitized build of libmercury, mercury-ps and mercuryctl"
	tail -n 20 "$w"/build-*.log | sed 's/^/# /'
	echo "1..$n"
	exit 1
fi

# unit tests, sanitized: each test binary is one line here, its own TAP
# lines kept as comments
for t in "$w"/userspace/{lib,ps,ctl}/tests/test_*; do
	case $t in *.c|*.o|*.h) continue ;; esac
	[ -x "$t" ] || continue
	name=${t#"$w"/userspace/}
	# from where the component's own "make test" runs it
	case $name in
	ps/*) dir=$(dirname "$t") ;;
	*) dir=$(dirname "$(dirname "$t")") ;;
	esac
	(cd "$dir" && CMOCKA_MESSAGE_OUTPUT=TAP "$t") > "$w/t.log" 2>&1
	rc=$?
	if [ $rc = 0 ]; then
		ok "ASan+UBSan: $name: $(grep -c '^ok' "$w/t.log") tests pass"
	else
		nok "ASan+UBSan: $name (exit $rc)"
		grep -E '^not ok|ERROR|error:|runtime error|SUMMARY' "$w/t.log" | head -20 | sed 's/^/# /'
	fi
done

# fake peers in front of the sanitized mercury-ps
python3 "$top/selftests/faults/faults.py" --ps "$w/userspace/ps/mercury-ps" \
	--profile "$top/userspace/ps/tests/fixtures/tiny.json" > "$w/faults.log" 2>&1
rc=$?
while IFS= read -r line; do
	case $line in
	"ok "*) ok "mercury-ps (ASan+UBSan): ${line#ok * }" ;;
	"not ok "*) nok "mercury-ps (ASan+UBSan): ${line#not ok * }" ;;
	"#"*) echo "$line" ;;
	esac
done < "$w/faults.log"
[ $rc = 0 ] || [ $fails -gt 0 ] || nok "faults.py exited $rc"
echo "1..$n"
[ $fails = 0 ]
