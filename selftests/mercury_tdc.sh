#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The kernel's tc-testing harness (tdc, from linux-source-6.1) on Mercury's
# cases, selftests/tc-testing/mercury.json: create with every option and
# the defaults, change, replace, delete, show and JSON show, every invalid
# value, mercury as a child of tbf, htb and mq. Each tdc result becomes one
# KTAP line here; a case tdc skipped (its setup failed) is a failure.
#
#   +---- ns tcut-mrc (tdc's nsPlugin) ----+
#   | $DUMMY (dummy, 1 or 4 tx queues):    |
#   |   mercury, or tbf/htb/mq -> mercury  |
#   +--------------------------------------+
source "$(dirname "$0")/lib.sh"
mercury_load

src=$MERCURY_ROOT/build/linux-src/tools/testing/selftests/tc-testing
cases=$MERCURY_ROOT/selftests/tc-testing/mercury.json
[ -f "$src/tdc.py" ] || { echo "not ok 1 tdc not found in $src (run scripts/install-deps.sh)"; exit 1; }

# build/ is read-only in the guest: run a copy in our own /tmp. tdc loads
# nsPlugin from plugin-lib/ itself, as the cases require it.
work=$(mktemp -d /tmp/mercury-tdc.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp -r "$src/." "$work/" || { echo "not ok 1 cannot copy tdc"; exit 1; }
# tdc runs commands with ENVIR only: pass ours on, for TC_LIB_DIR (the
# tc plugin) and PATH. Unique names keep us clear of other tests.
cat > "$work/tdc_config_local.py" <<PY
import os
ENVIR = os.environ.copy()
EXTRA_NAMES = {
    'TC': '$TC',
    'IP': '$IP',
    'NS': 'tcut-mrc-$$',
    'DEV0': 'mrc$$a',
    'DEV1': 'mrc$$b',
    'DUMMY': 'mrcdummy0',
}
PY

log "tdc: $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$cases") cases from $cases"
(cd "$work" && python3 tdc.py -f "$cases" --outfile "$work/results.tap") > "$work/tdc.out" 2>&1
rc=$?
sed 's/^/# tdc: /' "$work/tdc.out" | grep -v '^# tdc: *$' | head -n 400

[ -s "$work/results.tap" ] || { echo "not ok 1 tdc produced no results (exit $rc)"; exit 1; }
# tdc's TAP: "ok N ID - NAME", "ok N ID - NAME # skipped - WHY",
# "not ok N ID - NAME" followed by tab-indented detail lines.
while IFS= read -r line; do
	case $line in
	"not ok "*)
		ktap_fail "tdc $(echo "$line" | sed -E 's/^not ok [0-9]+ //')" ;;
	"ok "*"# skipped"*)
		ktap_fail "tdc $(echo "$line" | sed -E 's/^ok [0-9]+ //') (skipped counts as failed)" ;;
	"ok "*)
		ktap_ok "tdc $(echo "$line" | sed -E 's/^ok [0-9]+ //')" ;;
	$'\t'*)
		log "${line#$'\t'}" ;;
	esac
done < "$work/results.tap"
[ "$rc" = 0 ] || { [ $_ktap_fail -gt 0 ] || ktap_fail "tdc exited $rc"; }
ktap_finish
