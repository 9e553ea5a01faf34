# Installs cosched with everything it needs at run time, relocatable under any PREFIX:
#   PREFIX/bin/cosched                      the program (stripped; no path of this build tree inside)
#   PREFIX/lib/cosched/                     the OpenMP preload library and the benchmark programs
#   PREFIX/share/man/man1/                  cosched(1) and one page per subcommand
#   PREFIX/share/{bash-completion,zsh,fish} shell completions
# cosched finds lib/cosched/ relative to its own executable (COSCHED_NATIVE_DIR overrides it).
#
#   make install PREFIX=$HOME/.local
#   make install PREFIX=/usr DESTDIR=pkgroot     # staged, for packaging

PREFIX ?= /usr/local
DESTDIR ?=
CARGO ?= cargo
STRIP ?= strip
# A target directory of its own: the remapped RUSTFLAGS below would otherwise rebuild target/release.
INSTALL_TARGET ?= target/install
CARGO_HOME ?= $(HOME)/.cargo

root := $(DESTDIR)$(PREFIX)
built := $(INSTALL_TARGET)/release/cosched
natives := $(INSTALL_TARGET)/lib/cosched
# Panic messages carry source paths; these map the build's own and the registry's to neutral names.
remap := --remap-path-prefix=$(CURDIR)=cosched --remap-path-prefix=$(CARGO_HOME)=cargo

.PHONY: build install uninstall

build:
	RUSTFLAGS="$(RUSTFLAGS) $(remap)" $(CARGO) build --release --locked -p cosched \
	  --target-dir $(INSTALL_TARGET)

install: build
	install -d $(root)/bin $(root)/lib/cosched $(root)/share/man/man1 \
	  $(root)/share/bash-completion/completions $(root)/share/zsh/site-functions \
	  $(root)/share/fish/vendor_completions.d
	install -m 755 $(built) $(root)/bin/cosched
	$(STRIP) $(root)/bin/cosched
	install -m 755 $(natives)/* $(root)/lib/cosched/
	$(STRIP) --strip-debug $(root)/lib/cosched/*
	$(built) man -o $(root)/share/man/man1 >/dev/null
	$(built) completions bash > $(root)/share/bash-completion/completions/cosched
	$(built) completions zsh > $(root)/share/zsh/site-functions/_cosched
	$(built) completions fish > $(root)/share/fish/vendor_completions.d/cosched.fish

uninstall:
	rm -f $(root)/bin/cosched $(root)/share/man/man1/cosched.1 $(root)/share/man/man1/cosched-*.1 \
	  $(root)/share/bash-completion/completions/cosched $(root)/share/zsh/site-functions/_cosched \
	  $(root)/share/fish/vendor_completions.d/cosched.fish
	rm -rf $(root)/lib/cosched
