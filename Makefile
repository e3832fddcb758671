# perflab: `make lab` sets everything up and starts JupyterLab; `make test` runs ruff, then every test.
# Both install what is missing (Debian packages, the locked Python environment,
# mdBook) and skip what is already there, so a warm re-run takes seconds.

SHELL          := /bin/bash
UV_VERSION     := 0.13.8
MDBOOK_VERSION := 0.4.52
PORT           ?= 8888
PYTEST_ARGS    ?=
VENV           := .venv
TOOLS          := .tools
UV             := $(TOOLS)/uv/bin/uv
MDBOOK         := $(TOOLS)/bin/mdbook
PROXY          := $(TOOLS)/proxy/node_modules/.bin/configurable-http-proxy
ALLOW_ROOT     := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: lab test setup deps test-deps python proxy bench book clean side-by-side

lab: setup
	@echo "perflab: JupyterLab on 127.0.0.1:$(PORT); open the URL with the token printed below. Ctrl-C stops it."
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --port=$(PORT) --no-browser $(ALLOW_ROOT) \
	    --LabApp.default_url=/perflab/ --ServerApp.root_dir=$(CURDIR)

# Two phases: the tests that time nothing run side by side (pytest-xdist; tests that share a VM or change the
# same knobs stay on one worker), then the tests marked live run alone, since each measures this machine.
# Three workers on two CPUs: while one waits (for Vagrant, JupyterHub, a guest), two keep both CPUs busy
# (94% busy against 84% with two; 441 s against 474 s here).
test: setup test-deps
	$(VENV)/bin/ruff check .
	$(VENV)/bin/python -m pytest --phase parallel -n 3 --dist loadgroup $(PYTEST_ARGS)
	$(VENV)/bin/python -m pytest --phase live $(PYTEST_ARGS)

# The Debian packages first (what the rest builds with), then the rest side by side: the Python environment,
# the proxy, the benchmarks and mdBook's compile need nothing of one another (39 s on a fresh clone here, not 45 s).
setup: deps
	@$(MAKE) --no-print-directory -j3 python proxy bench book

# Debian's npm only where no npm is installed: NodeSource's nodejs carries its own and conflicts with Debian's.
deps:
	@deps/install-debian deps/debian.txt
	@command -v npm >/dev/null || deps/install-debian deps/debian-npm.txt

test-deps: | deps  # one apt at a time, under make -j too
	@deps/install-debian deps/debian-test.txt

# perflab itself too (an editable install, which uv does not compile), each time: only what changed is compiled
# again, in a fraction of a second; a learner's process or a guest's, which may not write here, then reads it.
python: $(VENV)/.synced
	$(VENV)/bin/python -m compileall -q perflab

$(UV):
	python3 -m venv $(TOOLS)/uv
	$(TOOLS)/uv/bin/pip install -q uv==$(UV_VERSION)

# The lock file pins every Python package; --frozen refuses to run if it is stale.
# JupyterLab's defaults come from deps/: no news pop-up over the course's notebooks, a notebook that starts
# Python without asking (opened before the kernels were listed, JupyterLab asks which kernel), and the
# perflab server extension (the landing page, the book, the learner's workspace in work/).
# Debian's python3, not whichever comes first on PATH: every user can run it, as a workshop's
# learners must (a pyenv under /root, say, is private to root).
# Compiled to bytecode here, once: uv leaves it to each package's first import, and where that cannot write
# (a workshop's learners, PYTHONDONTWRITEBYTECODE) every process compiles scipy, matplotlib and Jupyter again.
$(VENV)/.synced: Makefile pyproject.toml uv.lock deps/jupyterlab-overrides.json deps/jupyter-server-perflab.json | $(UV)
	UV_PYTHON_DOWNLOADS=never $(UV) sync --frozen --compile-bytecode --python /usr/bin/python3 --quiet
	install -D -m 644 deps/jupyterlab-overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	install -D -m 644 deps/jupyter-server-perflab.json $(VENV)/etc/jupyter/jupyter_server_config.d/perflab.json
	touch $@

# JupyterHub's proxy for `perflab workshop`, pinned by deps/proxy/package-lock.json.
proxy: $(PROXY)

$(PROXY): deps/proxy/package.json deps/proxy/package-lock.json | deps  # npm, where `make proxy` runs alone
	install -D -m 644 -t $(TOOLS)/proxy deps/proxy/package.json deps/proxy/package-lock.json
	cd $(TOOLS)/proxy && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Only the search feature: JupyterLab serves the built book, so mdBook's own server is not needed (and compiles for minutes).
# Unoptimised: it renders this small book in under a second either way, and compiles in half the time (55 s, not 2 min, on 2 cores).
$(MDBOOK):
	CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_DEBUG=false cargo install mdbook --version $(MDBOOK_VERSION) --locked --no-default-features --features search --root $(TOOLS)

bench:
	@$(MAKE) -s -C perflab/native
	@for lab in labs/[0-9]*/; do $(MAKE) -s -C $$lab || exit 1; done
	@$(MAKE) -s -C labs/04-page-table-levels guest  # lab 4 quick guests: static, for an initramfs

book: $(MDBOOK)
	@$(MDBOOK) build book >/dev/null 2>book/build.log || { cat book/build.log; exit 1; }

clean:
	rm -rf build book/build

# The side-by-side benchmark against the core-to-core-latency crate (not part of `make test`).
C2C_CRATE_VERSION := 1.2.0
$(TOOLS)/bin/core-to-core-latency:
	cargo install core-to-core-latency --version $(C2C_CRATE_VERSION) --locked --root $(TOOLS)

side-by-side: python bench $(TOOLS)/bin/core-to-core-latency
	$(VENV)/bin/python benchmarks/c2c_side_by_side.py
