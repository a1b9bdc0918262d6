# Two commands on a fresh machine (see README):
#   make demo   set up, then run Cairn end to end inside the real Claude Code CLI on real input
#   make test   set up, then run the whole test suite (fully offline)
VENV ?= .venv
PYTHON ?= python3
export HF_HUB_OFFLINE = 1

.PHONY: setup demo test e2e bench

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

e2e: setup
	$(VENV)/bin/pytest -q -m e2e tests/e2e
