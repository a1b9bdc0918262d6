"""One version, one marketplace: the copies that must agree do agree.

The version's home is .claude-plugin/plugin.json (docs/architecture.md, "Layout"); pyproject.toml and cairn.__version__
repeat it. marketplace.json at the top level is a byte-for-byte copy of .claude-plugin/marketplace.json.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import cairn

REPO = Path(__file__).resolve().parent.parent


def test_one_version():
    plugin = json.loads((REPO / ".claude-plugin" / "plugin.json").read_text(encoding="utf-8"))["version"]
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert (project, cairn.__version__) == (plugin, plugin), (
        f"plugin.json says {plugin}, pyproject.toml {project}, cairn.__version__ {cairn.__version__}")


def test_marketplace_copies_are_identical():
    top = (REPO / "marketplace.json").read_bytes()
    plugin = (REPO / ".claude-plugin" / "marketplace.json").read_bytes()
    assert top == plugin, "marketplace.json differs from .claude-plugin/marketplace.json: copy the one you changed"
    json.loads(top)
