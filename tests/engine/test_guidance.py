"""Import of guidance (guidance.py, `cairn import-guidance`): a deterministic split of CLAUDE.md /
AGENTS.md / .cursorrules into `add` proposals; nothing is stored before the user approves."""

from __future__ import annotations

import json

import pytest

from cairn import InvalidInput, InvalidMemory
from cairn.guidance import split

from tests.conftest import run_cli

CLAUDE_MD = """\
# Project guidance

This repository is the billing service.

## Conventions

- Always run `make lint` before pushing.
- Use uv for Python environments; never pip install into the system Python.
- Testing:
  - Integration tests use a real PostgreSQL 16 container.
  - Never mock the payment gateway in end-to-end tests.

## Decisions

1. We decided to deploy with Kamal instead of Capistrano because builds were too slow.

```sh
make deploy
```

| a | table |
|---|---|
"""

CURSORRULES = """\
You are working on a TypeScript monorepo.
Prefer pnpm over npm for every package.
Never commit generated files under dist/.
"""


def test_the_split_follows_headings_bullets_and_paragraphs():
    items = split(CLAUDE_MD)
    assert [(i.text, i.kind, i.context) for i in items] == [
        ("This repository is the billing service.", "fact", "Project guidance"),
        ("Always run `make lint` before pushing.", "convention", "Project guidance > Conventions"),
        ("Use uv for Python environments; never pip install into the system Python.", "convention",
         "Project guidance > Conventions"),
        ("Integration tests use a real PostgreSQL 16 container.", "convention",
         "Project guidance > Conventions > Testing"),
        ("Never mock the payment gateway in end-to-end tests.", "convention",
         "Project guidance > Conventions > Testing"),
        ("We decided to deploy with Kamal instead of Capistrano because builds were too slow.", "decision",
         "Project guidance > Decisions"),
    ]
    assert split(CLAUDE_MD) == items  # deterministic
    assert items[1].line == 7


def test_plain_rule_lines_are_one_item_each():
    assert [i.text for i in split(CURSORRULES)] == [
        "You are working on a TypeScript monorepo.", "Prefer pnpm over npm for every package.",
        "Never commit generated files under dist/."]


def test_import_queues_proposals_and_stores_nothing_before_approval(kw_memory, tmp_path):
    path = tmp_path / "CLAUDE.md"
    path.write_text(CLAUDE_MD)
    done = kw_memory.review.import_guidance(path)
    assert (done["items"], done["queued"], done["pending"], done["exists"]) == (6, 6, 0, 0)
    assert kw_memory.list() == []
    queued = kw_memory.review.queue(types=["add"])
    assert [p.payload["text"] for p in queued][1] == "Always run `make lint` before pushing."
    assert queued[1].payload["context"] == "Project guidance > Conventions" and queued[1].payload["origin"] == \
        "CLAUDE.md:7"
    again = kw_memory.review.import_guidance(path)
    assert (again["queued"], again["pending"]) == (0, 6)  # importing twice queues nothing twice
    kw_memory.review.decide(queued[1].id, "approve")
    (stored,) = kw_memory.list()
    assert (stored.text, stored.kind, stored.source) == ("Always run `make lint` before pushing.", "convention",
                                                        "import")


def test_bad_files_are_one_clear_error(kw_memory, tmp_path):
    with pytest.raises(InvalidInput, match="cannot read"):
        kw_memory.review.import_guidance(tmp_path / "missing.md")
    bad = tmp_path / "bad.md"
    bad.write_bytes(b"- fine\n- \xff\xfe broken\n")
    with pytest.raises(InvalidInput, match="not valid UTF-8"):
        kw_memory.review.import_guidance(bad)
    assert kw_memory.review.queue() == []


def test_cli_import_guidance(project, monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(project)
    monkeypatch.setenv("CAIRN_NO_WARM", "1")
    path = tmp_path / ".cursorrules"
    path.write_text(CURSORRULES)
    code, out, err = run_cli(capsys, ["import-guidance", str(path), "--json"])
    assert code == 0, err
    assert json.loads(out)["queued"] == 3
    code, out, _ = run_cli(capsys, ["import-guidance", str(path)])
    assert code == 0 and "0 queued for review, 3 already queued" in out
    code, out, _ = run_cli(capsys, ["review", "list"])
    assert code == 0 and "Prefer pnpm over npm for every package." in out


def test_secrets_and_private_spans_never_reach_the_queue(kw_memory, tmp_path, cairn_home):
    key = "sk-ant-api03-" + "Qx7Lm2Vb9Tn4Rc8Wd1Fy6Hj3Kp5Zs0Ge" * 3
    guide = tmp_path / "CLAUDE.md"
    guide.write_text("# Database PGPASSWORD=Sup3rS3cretPassw0rd\n\n"
                     f"- Connect with PGPASSWORD=Sup3rS3cretPassw0rd and the key {key}\n"
                     "- The wiki password lives in <private>wikipass123</private> the vault\n")
    done = kw_memory.review.import_guidance(guide)
    assert done["queued"] == 2
    direct = kw_memory.review.propose("Use the token", context=f"Setup {key}",
                                      applies_when=["PGPASSWORD=Sup3rS3cretPw"])
    assert direct["status"] == "queued"
    queued = json.dumps([p.to_json() for p in kw_memory.store.proposals()])
    for secret in ("Sup3rS3cretPassw0rd", "Sup3rS3cretPw", key[:20], "wikipass123"):
        assert secret not in queued
    assert "[REDACTED:Secret Assignment]" in queued and "[REDACTED:Anthropic API Key]" in queued
    with pytest.raises(InvalidMemory, match="all <private> content"):
        kw_memory.review.propose("<private>only this</private>")
    with pytest.raises(InvalidMemory, match="tag 1 holds a secret"):
        kw_memory.review.propose("Rotate the key", tags=(key,))
    kw_memory.store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    from tests.storage.test_erasure import files_holding
    assert files_holding(cairn_home, (b"Sup3rS3cret", b"wikipass123")) == {}


def test_review_list_says_how_many_more_match_than_it_shows(project, monkeypatch, capsys, kw_memory):
    for i in range(3):
        kw_memory.review.propose(f"Proposed rule number {i}: keep modules under {i + 3}00 lines")
    monkeypatch.chdir(project)
    code, out, _ = run_cli(capsys, ["review", "list", "--limit", "2"])
    assert code == 0 and "... and 1 more" in out
    code, out, _ = run_cli(capsys, ["review", "list", "--limit", "2", "--json"])
    listed = json.loads(out)
    assert listed["count"] == 2 and listed["total"] == 3


def test_a_wrapped_paragraph_is_one_item_and_a_sub_item_names_its_parent():
    text = ("# Errors\n\nDo not swallow exceptions; log them with\n`logger.exception` and re-raise.\n\n"
            "- Pin every dependency with pip-tools.\n  - Exception: CI images already have pip pinned.\n\n"
            "| env | url |\n|---|---|\n| prod | https://x |\n\n```sh\nmake lint\n```\n")
    items = split(text)
    assert [(i.text, i.context) for i in items] == [
        ("Do not swallow exceptions; log them with `logger.exception` and re-raise.", "Errors"),
        ("Pin every dependency with pip-tools.", "Errors"),
        ("Exception: CI images already have pip pinned.", "Errors > Pin every dependency with pip-tools."),
    ]
    from cairn.guidance import left_out
    assert left_out(text) == {"tables": 1, "code blocks": 1}


def test_importing_again_does_not_requeue_what_the_user_decided(kw_memory, tmp_path):
    guide = tmp_path / "AGENTS.md"
    guide.write_text("- Never commit generated files under dist/.\n- Prefer pnpm over npm for every package.\n")
    first = kw_memory.review.import_guidance(guide)
    assert first["queued"] == 2
    keep, edit = kw_memory.review.queue(types=["add"])
    kw_memory.review.decide(keep.id, "keep")
    kw_memory.review.decide(edit.id, "edit", text="Use pnpm, never npm or yarn.")
    again = kw_memory.review.import_guidance(guide)
    assert again["queued"] == 0 and again["reviewed"] == 2
    assert kw_memory.review.queue(types=["add"]) == []
