# Installs cosched with everything it needs at run time, relocatable under any PREFIX:
#   PREFIX/bin/cosched                      the program (stripped; no path of this build tree inside)
#   PREFIX/lib/cosched/                     the OpenMP preload library and the benchmark programs
#   PREFIX/share/man/man1/                  cosched(1) and one page per subcommand
#   PREFIX/share/{bash-completion,zsh,fish} shell completions
#   PREFIX/share/doc/cosched/               README.md and docs/*.md
#   PREFIX/lib/systemd/{system,user}/       cosched.service, the system and the per-user daemon
# cosched finds lib/cosched/ relative to its own executable (COSCHED_NATIVE_DIR overrides it).
#
#   make install PREFIX=$HOME/.local
#   make install PREFIX=/usr DESTDIR=pkgroot     # staged, for packaging
#   make deb                                     # target/deb/cosched_VERSION_ARCH.deb, with dpkg-deb

PREFIX ?= /usr/local
DESTDIR ?=
CARGO ?= cargo
STRIP ?= strip
# A target directory of its own: the remapped RUSTFLAGS below would otherwise rebuild target/release.
INSTALL_TARGET ?= target/install
CARGO_HOME ?= $(HOME)/.cargo

root := $(DESTDIR)$(PREFIX)
bindir := $(PREFIX)/bin
docdir := $(PREFIX)/share/doc/cosched
# systemd looks in /usr/lib and /usr/local/lib for units; elsewhere, point these where it looks.
SYSTEMD_SYSTEM_UNIT_DIR ?= $(PREFIX)/lib/systemd/system
SYSTEMD_USER_UNIT_DIR ?= $(PREFIX)/lib/systemd/user
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
# Recorded in every results directory's metadata.json; empty outside a git checkout.
GIT_REVISION := $(shell git describe --always --dirty 2>/dev/null)
built := $(INSTALL_TARGET)/release/cosched
natives := $(INSTALL_TARGET)/lib/cosched
# Panic messages carry source paths; these map the build's own and the registry's to neutral names.
remap := --remap-path-prefix=$(CURDIR)=cosched --remap-path-prefix=$(CARGO_HOME)=cargo

.PHONY: build install uninstall deb deb-control

build:
	COSCHED_GIT_REVISION="$(GIT_REVISION)" RUSTFLAGS="$(RUSTFLAGS) $(remap)" \
	  $(CARGO) build --release --locked -p cosched \
	  --target-dir $(INSTALL_TARGET)

install: build
	install -d $(root)/bin $(root)/lib/cosched $(root)/share/man/man1 \
	  $(root)/share/bash-completion/completions $(root)/share/zsh/site-functions \
	  $(root)/share/fish/vendor_completions.d
	install -m 755 $(built) $(root)/bin/cosched
	$(STRIP) --remove-section=.comment --remove-section=.note $(root)/bin/cosched
	install -m 755 $(natives)/* $(root)/lib/cosched/
	# As dh_strip does: the dynamic symbols the preload library and the programs link by stay.
	$(STRIP) --strip-unneeded --remove-section=.comment --remove-section=.note $(root)/lib/cosched/*
	$(built) man -o $(root)/share/man/man1 >/dev/null
	$(built) completions bash > $(root)/share/bash-completion/completions/cosched
	$(built) completions zsh > $(root)/share/zsh/site-functions/_cosched
	$(built) completions fish > $(root)/share/fish/vendor_completions.d/cosched.fish
	install -d $(root)/share/doc/cosched $(DESTDIR)$(SYSTEMD_SYSTEM_UNIT_DIR) \
	  $(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)
	install -m 644 README.md docs/*.md $(root)/share/doc/cosched/
	sed -e 's|@bindir@|$(bindir)|g' -e 's|@docdir@|$(docdir)|g' dist/cosched.service \
	  > $(DESTDIR)$(SYSTEMD_SYSTEM_UNIT_DIR)/cosched.service
	sed -e 's|@bindir@|$(bindir)|g' -e 's|@docdir@|$(docdir)|g' dist/cosched-user.service \
	  > $(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)/cosched.service
	chmod 644 $(DESTDIR)$(SYSTEMD_SYSTEM_UNIT_DIR)/cosched.service \
	  $(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)/cosched.service

uninstall:
	rm -f $(root)/bin/cosched $(root)/share/man/man1/cosched.1 $(root)/share/man/man1/cosched-*.1 \
	  $(root)/share/bash-completion/completions/cosched $(root)/share/zsh/site-functions/_cosched \
	  $(root)/share/fish/vendor_completions.d/cosched.fish \
	  $(DESTDIR)$(SYSTEMD_SYSTEM_UNIT_DIR)/cosched.service $(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)/cosched.service
	rm -rf $(root)/lib/cosched $(root)/share/doc/cosched

# A Debian package from a staged install under /usr, built with dpkg-deb alone (no debian/ source
# tree): what debhelper would add is done by deb-control. The staged tree is debian/cosched, where
# dpkg-shlibdeps looks for a package's files.
debroot := target/deb/debian/cosched
deb:
	rm -rf target/deb
	$(MAKE) install PREFIX=/usr DESTDIR=$(CURDIR)/$(debroot)
	$(MAKE) deb-control DEBROOT=$(debroot)
	dpkg-deb --root-owner-group -Zxz --build $(debroot) \
	  target/deb/cosched_$(VERSION)_$$(dpkg --print-architecture).deb

# In the staged tree DEBROOT: man pages compressed as Debian policy asks (gzip -9n: no name or time
# inside, so the same tree gives the same bytes), the copyright file with the licence's full text,
# the Debian changelog, the maintainer scripts (dist/debian/), DEBIAN/md5sums for debsums and dpkg
# --verify, and DEBIAN/control with Depends computed from the ELF files (dist/debian/depends).
# Dated by the last commit (SOURCE_DATE_EPOCH overrides it), so a rebuild of one revision is the same.
DEB_DATE := $(shell date -R -u -d @$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null || date +%s)})
# Whoever builds the package maintains it: DEBFULLNAME and DEBEMAIL as for dch, else git's user.
MAINTAINER ?= $(or $(DEBFULLNAME),$(shell git config user.name),cosched developers) \
  <$(or $(DEBEMAIL),$(shell git config user.email),cosched@localhost)>
deb-control:
	install -d $(DEBROOT)/DEBIAN
	gzip -9nf $(DEBROOT)/usr/share/man/man1/*.1
	install -m 644 dist/debian/copyright $(DEBROOT)/usr/share/doc/cosched/copyright
	printf '%s\n' \
	  'cosched ($(VERSION)) unstable; urgency=medium' '' \
	  '  * Release $(VERSION); its changes are listed in CHANGELOG.md of the source tree.' '' \
	  ' -- $(MAINTAINER)  $(DEB_DATE)' \
	  | gzip -9n > $(DEBROOT)/usr/share/doc/cosched/changelog.gz
	install -m 755 dist/debian/postinst dist/debian/prerm dist/debian/postrm $(DEBROOT)/DEBIAN/
	cd $(DEBROOT) && find usr -type f | LC_ALL=C sort | xargs md5sum > DEBIAN/md5sums
	chmod 644 $(DEBROOT)/DEBIAN/md5sums
	depends=$$(dist/debian/depends $(DEBROOT)) && \
	printf '%s\n' \
	  'Package: cosched' \
	  'Version: $(VERSION)' \
	  "Architecture: $$(dpkg --print-architecture)" \
	  'Maintainer: $(MAINTAINER)' \
	  "Installed-Size: $$(du -sk $(DEBROOT)/usr | cut -f1)" \
	  "Depends: $$depends" \
	  'Section: admin' \
	  'Priority: optional' \
	  'Description: user-space co-scheduler for parallel applications' \
	  ' cosched decides which CPUs each parallel job gets, when it runs (coordinated' \
	  ' time slices for all its threads) and how many threads it should use, on' \
	  ' multicore and NUMA machines; real runs, simulation and a node daemon.' \
	  > $(DEBROOT)/DEBIAN/control
