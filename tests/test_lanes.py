"""The test lanes say what they do: every marker is declared and has a row in CONTRIBUTING.md, the
fast lane leaves out what CONTRIBUTING.md says it does, and a test's marks follow its fixtures."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def declared_markers() -> set[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    return {line.split(":", 1)[0] for line in config["markers"]}


def test_every_declared_marker_has_a_row_in_contributing_and_no_row_is_undeclared():
    rows = set(re.findall(r"^\| `(\w+)` \|", (REPO / "CONTRIBUTING.md").read_text(), flags=re.M))
    markers = declared_markers()
    assert markers <= rows, f"markers without a row in CONTRIBUTING.md: {markers - rows}"
    assert rows - markers <= {"make"}, f"rows for undeclared markers: {rows - markers}"


def test_the_fast_lane_leaves_out_what_contributing_says():
    fast = re.search(r"^FAST = (.+)$", (REPO / "Makefile").read_text(), flags=re.M).group(1)
    left_out = set(re.findall(r"not (\w+)", fast))
    assert fast == " and ".join(f"not {m}" for m in re.findall(r"not (\w+)", fast))  # nothing else in it
    row = next(line for line in (REPO / "CONTRIBUTING.md").read_text().splitlines()
               if line.startswith("| `make test` |"))
    said = set(re.findall(r"`(\w+)`", row.split("except those marked", 1)[1].split(";", 1)[0]))
    assert left_out == said and left_out <= declared_markers()


class _Item:
    """What conftest's collection hook reads and writes of a collected test."""

    def __init__(self, *fixtures: str):
        self.fixturenames, self.marks = fixtures, set()

    def add_marker(self, mark) -> None:
        self.marks.add(getattr(mark, "name", mark))

    def get_closest_marker(self, name: str):
        return name if name in self.marks else None


def test_the_model_mark_follows_the_pytorch_fixture_and_the_shipped_model_needs_none():
    from tests.conftest import pytest_collection_modifyitems

    torch, shipped, postgres = _Item("project", "st_minilm"), _Item("memory", "minilm"), _Item("pg_server")
    pytest_collection_modifyitems([torch, shipped, postgres])
    assert torch.marks == {"model", "xdist_group"}  # and the model tests share one worker
    assert shipped.marks == set() and postgres.marks == {"postgres"}
