"""The docs are true by construction: generated parts of docs/*.md are current, and nothing is left out.

docs/cli.md and docs/python-api.md carry cog blocks (https://cog.readthedocs.io) that generate the
command reference, the JSON keys, the statuses, the SQL schema and the API reference from the code;
`make docs` regenerates them. A JSON key without a meaning in docs/cli.md fails the cog run itself.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from cairn import models
from cairn.adapters.cli import cli

REPO = Path(__file__).resolve().parent.parent
COGGED = ["docs/cli.md", "docs/python-api.md", "docs/http.md", "docs/architecture.md"]
CLI_MD = REPO / "docs" / "cli.md"


def _commands(cmd: click.Command = cli, parent: click.Context | None = None, name: str = "cairn"):
    ctx = click.Context(cmd, info_name=name, parent=parent, **cmd.context_settings)
    yield cmd, ctx
    for sub_name, sub in getattr(cmd, "commands", {}).items():
        yield from _commands(sub, ctx, sub_name)


def _mentions(text: str, word: str) -> bool:
    """`word` occurs on its own: `--tag` is not found in `--tags`."""
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


def test_generated_docs_are_current():
    pytest.importorskip("cogapp")
    proc = subprocess.run([sys.executable, "-m", "cogapp", "--check", *COGGED], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"docs are stale: run `make docs`\n{proc.stdout}{proc.stderr}"


def test_every_command_and_option_is_documented():
    text = CLI_MD.read_text(encoding="utf-8")
    missing = []
    for cmd, ctx in _commands():
        if f"### {ctx.command_path}\n" not in text:
            missing.append(ctx.command_path)
        for param in cmd.get_params(ctx):
            if isinstance(param, click.Option):
                missing += [f"{ctx.command_path} {o}" for o in [*param.opts, *param.secondary_opts]
                            if not _mentions(text, o)]
    assert not missing, f"not in docs/cli.md: {missing}"


def test_every_json_key_is_documented():
    memory = models.Memory(**{
        **{f.name: None for f in dataclasses.fields(models.Memory)},
        **dict(id="01J00000000000000000000000", text="t", kind="fact", tags=(), importance=3, source="user",
               valid_from=0, recorded_at=0),
    })
    keys = {
        "Memory": memory.to_json(),
        "Status": [f.name for f in dataclasses.fields(models.Status)],
        "RememberResult": models.RememberResult(memory=memory, status="created").to_json(),
        "Hit": models.Hit(memory=memory, score=0.0, reasons={}).to_json(),
        "STATUSES": models.STATUSES,
    }
    text = CLI_MD.read_text(encoding="utf-8")
    missing = [f"{record}.{key}" for record, names in keys.items() for key in names
               if f"| `{key}` |" not in text]
    assert not missing, f"no row in docs/cli.md: {missing}"


def test_the_readme_stays_short_and_every_doc_page_exists():
    """The README is for users and stays at most 8 KB; the rest lives in docs/ and the pages beside it."""
    readme = REPO / "README.md"
    assert readme.stat().st_size <= 8 * 1024, f"README.md is {readme.stat().st_size} bytes: move detail to docs/"
    for page in ["docs/architecture.md", "CONTRIBUTING.md", "CHANGELOG.md"]:
        assert (REPO / page).is_file(), page


def test_every_relative_link_in_the_docs_resolves():
    pages = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```|`[^`\n]*`", "", page.read_text(encoding="utf-8"), flags=re.S)  # code is not a link
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            path = target.split("#", 1)[0]
            if path and "://" not in path and not (page.parent / path).exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert not broken, f"links to nothing: {broken}"
