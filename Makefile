# SPDX-License-Identifier: GPL-2.0
#
# Mercury top-level Makefile.
#   make            module, tc plugin and userspace tools
#   make test       install what is missing, build, run every test (host + VM)
#   make demo       install what is missing, build, boot the VM, show Mercury vs FIFO
#   make style      checkpatch --strict on kmod/ and tc-plugin/
#   make check      sparse and W=1 build of the module

# The kernel we build for: the newest one whose headers are installed,
# unless KVER is given. Never the running kernel: it may have no modules.
KVER ?= $(shell ls -d /lib/modules/*/build 2>/dev/null | sed 's|/lib/modules/||;s|/build||' | sort -V | tail -n 1)
KDIR ?= /lib/modules/$(KVER)/build
CHECKPATCH = build/linux-src/scripts/checkpatch.pl

USERSPACE_DIRS = $(wildcard userspace/*/Makefile)

.PHONY: all module tc-plugin userspace deps test demo style check clean

all: module tc-plugin userspace

module:
	@test -d "$(KDIR)" || { echo "mercury: no kernel headers in /lib/modules (run scripts/install-deps.sh)" >&2; exit 1; }
	$(MAKE) -C $(KDIR) M=$(CURDIR) W=1 modules

tc-plugin:
	$(MAKE) -C tc-plugin

userspace:
	@set -e; for m in $(USERSPACE_DIRS); do $(MAKE) -C $$(dirname $$m); done

deps:
	scripts/install-deps.sh

test: deps
	scripts/run-tests.sh

demo: deps
	scripts/demo.sh

# CAMELCASE is ignored: its only hits are the kernel's own Qdisc,
# Qdisc_ops and Qdisc_class_ops, which --no-tree cannot know are existing
# kernel identifiers.
STYLE_FILES = kmod/*.c kmod/*.h include/uapi/linux/*.h $(wildcard tc-plugin/*.c)
style:
	$(CHECKPATCH) --strict --no-tree --terse --show-types --ignore CAMELCASE -f $(STYLE_FILES)

check:
	$(MAKE) -C $(KDIR) M=$(CURDIR) W=1 C=2 CHECK="sparse" modules

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean 2>/dev/null || true
	$(MAKE) -C tc-plugin clean
	@for m in $(USERSPACE_DIRS); do $(MAKE) -C $$(dirname $$m) clean; done
	rm -rf out
