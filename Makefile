# On a fresh machine (see README):
#   make demo   install the runtime only, then run Cairn end to end inside the real Claude Code CLI on real input
#   make test   the fast lane: install the test extras, then every test except e2e, bootstrap, stress and
#               postgres (offline), on one worker per core
# For contributors (CONTRIBUTING.md):
#   make check  everything: the fast lane plus the e2e tests, the runtime bootstrap from PyPI, the
#               stress runs and the Postgres tests, which must run (CI=1 turns pgserver's skip into a failure). .ci/run calls it
#   make lint   ruff, mypy (the type gate: [tool.mypy] in pyproject.toml), and a check that the generated
#               parts of the docs are current
#   make docs   regenerate those parts (docs/cli.md, docs/python-api.md, docs/http.md) from the code
VENV ?= .venv
PYTHON ?= python3
export HF_HUB_OFFLINE = 1

.PHONY: setup runtime demo test check e2e lint docs lock

# Markers (pyproject.toml) choose the lanes.
FAST = not e2e and not bootstrap and not stress and not postgres

# The runtime alone: Cairn and its dependencies, what the plugin installs (no PyTorch, no test tools).
# tests/e2e/demo.py and its helpers import only the standard library and cairn.
$(VENV)/.runtime: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e .
	touch $@

# The test install: the runtime plus the test extras (both optional embedders, pgserver, the tools).
$(VENV)/.installed: pyproject.toml engine/runtime-requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e ".[test]"
	touch $(VENV)/.runtime $@

runtime: $(VENV)/.runtime
setup: $(VENV)/.installed

demo: runtime
	$(VENV)/bin/python tests/e2e/demo.py

# The fast lane runs on JOBS workers (pytest-xdist; default one per core): a module stays on one
# worker (its module-scoped fixtures start once) and the `model` tests share one (PyTorch loads once).
# `make test JOBS=0` runs it in one process.
JOBS ?= auto

test: setup
	$(VENV)/bin/pytest -q -n $(JOBS) --dist loadgroup -m "$(FAST)"

check: setup
	CI=1 $(VENV)/bin/pytest -q

COGGED = docs/cli.md docs/python-api.md docs/http.md docs/architecture.md

lint: setup
	$(VENV)/bin/ruff check engine tests bench tools mcp hooks
	$(VENV)/bin/mypy
	$(VENV)/bin/python -m cogapp --check --check-fail-msg="run make docs" $(COGGED)

docs: setup
	$(VENV)/bin/python -m cogapp -r $(COGGED)

e2e: setup
	$(VENV)/bin/pytest -q -m e2e tests/e2e

# The plugin runtime's hash lock (all transitive packages, every platform's wheels) from its pins.
UV_COMPILE = $(VENV)/bin/uv pip compile --universal --generate-hashes --python-version 3.11 --quiet \
	--index-url https://pypi.org/simple --custom-compile-command "make lock"
lock: setup
	$(VENV)/bin/pip install --quiet uv
	$(UV_COMPILE) engine/runtime-requirements.in -o engine/runtime-requirements.txt
	$(UV_COMPILE) engine/runtime-extras/multilingual.in -c engine/runtime-requirements.txt \
		-o engine/runtime-extras/multilingual.txt
	$(VENV)/bin/python -c "import hashlib; print(hashlib.sha256(open('engine/runtime-requirements.txt', 'rb').read()).hexdigest())" \
		> engine/runtime-requirements.sha256
