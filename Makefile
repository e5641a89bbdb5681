# SPDX-License-Identifier: GPL-2.0
#
# Mercury top-level Makefile.
#   make            module, tc plugin and userspace tools
#   make test       install what is missing, build, run every test (host + VM):
#                   the whole guest suite on KVER, the core scripts on each
#                   other installed kernel (Documentation/install.md, "Kernels")
#   make test-kernels the whole guest suite on every installed kernel
#   make demo       PyTorch, 2 ranks over the emulated link: stock DDP, DDP fp16,
#                   the true FIFO and mercury.torch on sch_mercury, with a picture
#                   (scripts/demo.sh: installs what is missing, ~40 lines, log in out/demo)
#   make bench      the full emulated-training benchmark (Documentation/benchmark.md)
#   make bench-torch real PyTorch (host ranks) through the guest's qdiscs,
#                   against DDP's own variants (Documentation/torch.md;
#                   an hour with five schemes, more with all; BT_QUICK=1
#                   for a preview of every scheme)
#   make bench-shared the shared-NIC scenarios per qdisc, 3 boots each, one
#                   table each, within the hour: training beside a
#                   checkpoint upload, a shallow shared buffer, two jobs on
#                   one link (bench/shared/run.sh; BS_SCENARIO=shallow for
#                   one; BS_QUICK=1 for a plumbing check)
#   make perf       the qdisc cost benchmark (Documentation/performance.md)
#   make install    module, tc plugin, tools, library, man pages (Documentation/install.md)
#   make style      checkpatch --strict on kmod/ and tc-plugin/
#   make check      sparse and W=1 build of the module
#   make test-debug the guest suite and the long fuzz runs under a debug
#                   kernel (KASAN, kmemleak, lockdep; Documentation/safety.md)
#   make soak       SOAK_MINUTES (10) of traffic, changes and module reloads
#                   under the debug kernel (Documentation/safety.md)
#   make fuzz       libFuzzer (ASan + UBSan) on libmercury's plan and profile
#                   readers and its frame receiver, FUZZ_RUNS (10M) each
#                   (Documentation/safety.md; make test runs 20000 each)

# The kernel we build for and the guest boots, chosen once: KVER=K, else
# the newest kernel with both headers and an image (scripts/kver.sh), so
# that scripts/vm-run.sh loads the module into the kernel it was built
# for. Never the running kernel: it may have no modules. Exported, so the
# test and benchmark scripts boot the same one.
ifeq ($(strip $(KVER)),)
KVER := $(shell scripts/kver.sh)
endif
export KVER
KDIR ?= /lib/modules/$(KVER)/build
CHECKPATCH = build/linux-src/scripts/checkpatch.pl

USERSPACE_DIRS = $(wildcard userspace/*/Makefile)

.PHONY: all module tc-plugin userspace deps test demo bench bench-torch style check clean

all: module tc-plugin userspace

module:
	@test -d "$(KDIR)" || { echo "mercury: no kernel headers in /lib/modules (run scripts/install-deps.sh)" >&2; exit 1; }
	$(MAKE) -C $(KDIR) M=$(CURDIR) W=1 modules

# The module for any installed kernel, in a directory of its own (the
# tree's sch_mercury.ko stays KVER's): make module-kver KVER=K builds
# build/kmod/K/sch_mercury.ko from a copy of the DKMS source files.
# WERROR=1 turns W=1's warnings into errors, SPARSE=1 adds sparse (the
# test builds, scripts/run-tests.sh).
KMOD_DIR = $(CURDIR)/build/kmod/$(KVER)
.PHONY: module-kver
module-kver:
	@test -d "$(KDIR)" || { echo "mercury: no headers for kernel '$(KVER)' in /lib/modules" >&2; exit 1; }
	rm -rf $(KMOD_DIR)
	install -d $(KMOD_DIR)
	cp --parents $(DKMS_FILES) $(KMOD_DIR)/
	$(MAKE) -C $(KDIR) M=$(KMOD_DIR) W=1 $(if $(WERROR),KCFLAGS=-Werror) \
		$(if $(SPARSE),C=2 CHECK=sparse) modules

# after userspace: the plugin links libmercury's grammar objects, which
# a parallel build must not compile twice at once
tc-plugin: | userspace
	$(MAKE) -C tc-plugin

userspace:
	@set -e; for m in $(USERSPACE_DIRS); do $(MAKE) -C $$(dirname $$m); done

deps:
	scripts/install-deps.sh

test: deps
	scripts/run-tests.sh

# The whole guest suite (and the package install test) on each kernel
# with headers and an image, one kernel after the other.
.PHONY: test-kernels
test-kernels: deps
	scripts/run-tests.sh kernels

# (scripts/demo.sh installs the packages itself, its output in its log)
demo:
	@scripts/demo.sh

bench: deps all
	bench/run.sh --full

# Not part of make test (a guest boot of about 40 minutes); its report
# code is (bench/torch/test_report.py, suite unit-torch).
bench-torch: deps all
	bench/torch/run.sh -o $(CURDIR)/out/bench-torch

# Not part of make test either; its window accounting and table are
# (bench/shared/test_bulk.py, suite unit-shared).
.PHONY: bench-shared
bench-shared: deps all
	bench/shared/run.sh -o $(CURDIR)/out/bench-shared

# CAMELCASE is ignored: its only hits are the kernel's own Qdisc,
# Qdisc_ops and Qdisc_class_ops, which --no-tree cannot know are existing
# kernel identifiers.
STYLE_FILES = kmod/*.c kmod/*.h include/uapi/linux/*.h $(wildcard tc-plugin/*.c)
style:
	$(CHECKPATCH) --strict --no-tree --terse --show-types --ignore CAMELCASE -f $(STYLE_FILES)

check:
	$(MAKE) -C $(KDIR) M=$(CURDIR) W=1 C=2 CHECK="sparse" modules

# Safety runs under the debug guest kernel (scripts/debug-kernel/).
.PHONY: test-debug soak fuzz
fuzz: deps
	$(MAKE) -C userspace/lib fuzz
test-debug: deps
	scripts/debug-kernel/test-debug.sh

SOAK_MINUTES ?= 10
soak: deps
	SOAK_MINUTES=$(SOAK_MINUTES) scripts/debug-kernel/soak.sh

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean 2>/dev/null || true
	$(MAKE) -C selftests/fuzz clean
	$(MAKE) -C tc-plugin clean
	@for m in $(USERSPACE_DIRS); do $(MAKE) -C $$(dirname $$m) clean; done
	rm -rf out build/kmod

# ---------------------------------------------------------------------------
# Install, uninstall, DKMS and Debian packages (Documentation/install.md).
#   make install [DESTDIR=] [PREFIX=/usr/local] [KVER=]
#   make uninstall
#   make dkms-install      register the module with DKMS, build it for every
#                          installed kernel with headers
#   make deb               out/deb/: mercury-dkms, mercury-tools and one
#                          mercury-modules-K (the module prebuilt) for each
#                          kernel K in DEB_KVERS (every kernel with headers)
MERCURY_VERSION := $(shell cat VERSION)
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/mercury
# systemd reads units from /usr/local/lib/systemd/system as well.
UNITDIR ?= $(PREFIX)/lib/systemd/system
# The applier's configuration lives in /etc whatever the prefix.
CONFDIR ?= /etc/mercury
MODDIR ?= /lib/modules/$(KVER)/extra
DEPMOD ?= /sbin/depmod
# Where the installed tc looks for q_<kind>.so: its compiled-in library
# directory, not $(PREFIX) (a plugin in /usr/local would never be found).
TC_LIB_DIR_INSTALL ?= $(or $(shell strings /usr/sbin/tc 2>/dev/null | grep -m1 -E '^/usr/lib[^ ]*/tc/?$$' | sed 's|/$$||'),/usr/lib/$(shell gcc -print-multiarch)/tc)
INSTALL_VARS = DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" BINDIR="$(BINDIR)" \
	SBINDIR="$(SBINDIR)" LIBDIR="$(LIBDIR)" INCLUDEDIR="$(INCLUDEDIR)" \
	MANDIR="$(MANDIR)"
# Man pages next to the code they document (installed when present).
MAN_PAGES = $(wildcard tc-plugin/*.[1-8] userspace/*/*.[1-8] userspace/*/man/*.[1-8] Documentation/man/*.[1-8])
DKMS_SRC = /usr/src/mercury-$(MERCURY_VERSION)
DKMS_FILES = Kbuild $(wildcard kmod/*.c kmod/*.h) include/uapi/linux/mercury.h

.PHONY: install install-module install-tc-plugin install-userspace install-boot \
	uninstall dkms-install dkms-uninstall deb

install: install-module install-tc-plugin install-userspace install-boot
	@echo "mercury: installed into '$(DESTDIR)' (PREFIX=$(PREFIX), kernel $(KVER))"

install-module: module
	install -D -m 0644 sch_mercury.ko $(DESTDIR)$(MODDIR)/sch_mercury.ko
	@if [ -z "$(DESTDIR)" ]; then echo "$(DEPMOD) -a $(KVER)"; $(DEPMOD) -a $(KVER); \
	 else echo "mercury: DESTDIR set, not running depmod (run 'depmod -a $(KVER)' on the target)"; fi

install-tc-plugin: tc-plugin
	$(MAKE) -C tc-plugin install DESTDIR="$(DESTDIR)" TC_LIB_DIR_INSTALL="$(TC_LIB_DIR_INSTALL)"

# Every userspace dir whose Makefile has an install target; the others are
# named and skipped, so a component in progress does not break install.
install-userspace:
	@set -e; for m in $(USERSPACE_DIRS); do d=$$(dirname $$m); \
		if grep -q '^install:' $$m; then $(MAKE) -C $$d install $(INSTALL_VARS); \
		else echo "mercury: $$d has no install target, skipped"; fi; done
	@set -e; for p in $(MAN_PAGES); do s=$${p##*.}; \
		echo "install -D -m 0644 $$p $(DESTDIR)$(MANDIR)/man$$s/$$(basename $$p)"; \
		install -D -m 0644 $$p $(DESTDIR)$(MANDIR)/man$$s/$$(basename $$p); done
	@if [ -z "$(DESTDIR)" ] && command -v ldconfig >/dev/null; then ldconfig; fi

install-boot:
	install -D -m 0755 scripts/mercury-apply $(DESTDIR)$(SBINDIR)/mercury-apply
	install -d $(DESTDIR)$(UNITDIR)
	sed 's|@SBINDIR@|$(SBINDIR)|g' packaging/mercury@.service > $(DESTDIR)$(UNITDIR)/mercury@.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/mercury@.service
	install -D -m 0644 packaging/mercury.conf $(DESTDIR)$(DOCDIR)/mercury.conf.example
	@if [ -e $(DESTDIR)$(CONFDIR)/mercury.conf ]; then \
		echo "mercury: keeping existing $(DESTDIR)$(CONFDIR)/mercury.conf"; \
	 else echo "install -D -m 0644 packaging/mercury.conf $(DESTDIR)$(CONFDIR)/mercury.conf"; \
		install -D -m 0644 packaging/mercury.conf $(DESTDIR)$(CONFDIR)/mercury.conf; fi

# The configuration stays when the operator changed it.
uninstall:
	rm -f $(DESTDIR)$(MODDIR)/sch_mercury.ko
	@if [ -z "$(DESTDIR)" ] && [ -d /lib/modules/$(KVER) ]; then $(DEPMOD) -a $(KVER); fi
	$(MAKE) -C tc-plugin uninstall DESTDIR="$(DESTDIR)" TC_LIB_DIR_INSTALL="$(TC_LIB_DIR_INSTALL)"
	@set -e; for m in $(USERSPACE_DIRS); do d=$$(dirname $$m); \
		if grep -q '^uninstall:' $$m; then $(MAKE) -C $$d uninstall $(INSTALL_VARS); \
		else echo "mercury: $$d has no uninstall target, skipped"; fi; done
	@for p in $(MAN_PAGES); do rm -f $(DESTDIR)$(MANDIR)/man$${p##*.}/$$(basename $$p); done
	rm -f $(DESTDIR)$(SBINDIR)/mercury-apply $(DESTDIR)$(UNITDIR)/mercury@.service \
		$(DESTDIR)$(DOCDIR)/mercury.conf.example
	-rmdir $(DESTDIR)$(DOCDIR) 2>/dev/null
	@if cmp -s packaging/mercury.conf $(DESTDIR)$(CONFDIR)/mercury.conf; then \
		rm -f $(DESTDIR)$(CONFDIR)/mercury.conf; rmdir $(DESTDIR)$(CONFDIR) 2>/dev/null || true; \
	 elif [ -e $(DESTDIR)$(CONFDIR)/mercury.conf ]; then \
		echo "mercury: $(DESTDIR)$(CONFDIR)/mercury.conf was changed, kept"; fi
	@if [ -z "$(DESTDIR)" ] && command -v ldconfig >/dev/null; then ldconfig; fi

# dkms.conf declares the supported kernels: "dkms build" refuses any
# other with a BUILD_EXCLUSIVE message (exit 77), reported here as skipped.
dkms-install:
	@command -v dkms >/dev/null || { echo "mercury: dkms is not installed (apt-get install dkms)" >&2; exit 1; }
	-dkms remove -m mercury -v $(MERCURY_VERSION) --all >/dev/null 2>&1
	rm -rf $(DKMS_SRC)
	install -d $(DKMS_SRC)
	cp --parents $(DKMS_FILES) $(DKMS_SRC)/
	sed 's/#MODULE_VERSION#/$(MERCURY_VERSION)/' dkms.conf > $(DKMS_SRC)/dkms.conf
	dkms add -m mercury -v $(MERCURY_VERSION)
	@set -e; n=0; for b in /lib/modules/*/build; do k=$$(basename $$(dirname $$b)); \
		rc=0; dkms install -m mercury -v $(MERCURY_VERSION) -k $$k || rc=$$?; \
		case $$rc in 0) n=$$((n + 1)) ;; \
		77) echo "mercury: kernel $$k is outside the supported range (6.1 and later), skipped" ;; \
		*) echo "mercury: dkms failed for kernel $$k (exit $$rc)" >&2; exit $$rc ;; esac; \
	done; echo "mercury: sch_mercury installed by DKMS for $$n kernel(s)"

dkms-uninstall:
	-dkms remove -m mercury -v $(MERCURY_VERSION) --all
	rm -rf $(DKMS_SRC)

# From git HEAD; MERCURY_DEB_SRC=worktree packages the working tree.
DEB_KVERS ?= $(shell scripts/kver.sh --headers)
deb:
	DEB_KVERS="$(DEB_KVERS)" MERCURY_DEB_SRC="$(MERCURY_DEB_SRC)" \
		packaging/build-deb.sh $(MERCURY_VERSION)

# ---------------------------------------------------------------------------
# Qdisc cost benchmark (Documentation/performance.md): the userspace core
# microbenchmark, then pktgen against other qdiscs in one VM boot; tables
# and plots in out/perf, the document regenerated.
.PHONY: perf
perf: deps
	$(MAKE) -C bench/core run OUT=$(CURDIR)/out/perf
	bench/pktgen/run.sh -o $(CURDIR)/out/perf
