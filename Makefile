# Two commands on a fresh machine (see README):
#   make demo   set up, then run Cairn end to end inside the real Claude Code CLI on real input
#   make test   set up, then run the whole test suite (fully offline)
#   make lint   ruff, mypy (the type gate: [tool.mypy] in pyproject.toml), and a check that the generated
#               parts of the docs are current
#   make docs   regenerate those parts (docs/cli.md, docs/python-api.md, docs/http.md) from the code
VENV ?= .venv
PYTHON ?= python3
export HF_HUB_OFFLINE = 1

.PHONY: setup demo test e2e bench lint docs lock

$(VENV)/.installed: pyproject.toml engine/runtime-requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e ".[test]"
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(VENV)/bin/python tests/e2e/demo.py

test: setup
	$(VENV)/bin/pytest -q

COGGED = docs/cli.md docs/python-api.md docs/http.md

lint: setup
	$(VENV)/bin/ruff check engine tests bench mcp hooks
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
