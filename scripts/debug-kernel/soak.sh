#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make soak`: selftests/fuzz/soak.sh under the debug kernel, SOAK_MINUTES
# (default 10) one-minute rounds of pktgen and TCP/UDP traffic, option and
# limit changes, class dumps and a module reload per round; fails on any
# kernel report (KASAN, lockdep, kmemleak, ...), skb leak or accounting
# mismatch. Results in out/vm-soak (soak.log: packets per second over
# time, drops per reason).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
minutes=${SOAK_MINUTES:-10}
case $minutes in ''|*[!0-9]*) echo "soak: SOAK_MINUTES must be a number of minutes" >&2; exit 2 ;; esac
# a round is a minute of traffic plus its checks: minutes under KASAN on
# a loaded machine (a 2-round soak once ran past 25 minutes)
VM_APPEND="${VM_APPEND:-} SOAK_MINUTES=$minutes" VM_OUT=$top/out/vm-soak \
	VM_TIMEOUT=$((minutes * 600 + 1800)) MERCURY_TEST_TIMEOUT=$((minutes * 600 + 1200)) \
	exec "$top/scripts/debug-kernel/test-debug.sh" selftests/fuzz/soak.sh
