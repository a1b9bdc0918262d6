"""Import of guidance (guidance.py, `cairn import-guidance`): a deterministic split of CLAUDE.md /
AGENTS.md / .cursorrules into `add` proposals; nothing is stored before the user approves."""

from __future__ import annotations

import json

import pytest

from cairn import InvalidInput, InvalidMemory
from cairn.review.guidance import split

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
    assert "[REDACTED:Secret Assignment]" in queued and queued.count("[REDACTED:") >= 2  # the password and the key
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
    from cairn.review.guidance import left_out
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


# -- a whole tree: every kind of guidance file, each statement with its file's scope -------------------
TREE = {
    "CLAUDE.md": "# Project\n\n- Always run `make lint` before pushing.\n- Run the tests with pytest.\n\n@AGENTS.md\n",
    "AGENTS.md": "- Keep pull requests under 400 changed lines.\n",
    "src/payments/CLAUDE.md": "# Payments\n\n- Never log card numbers.\n- Run the tests with pytest.\n",
    "packages/web/AGENTS.md": "---\ntitle: web\n---\n- Use the design tokens, never raw colours.\n",
    ".cursor/rules/web.mdc": "---\ndescription: React\nglobs:\n  - \"web/**\"\n  - app/**/*.tsx\n"
                             "alwaysApply: false\n---\n- Use server components by default.\n",
    # Cursor's front matter is often not YAML (`*` opens an alias): a comma-separated string.
    ".cursor/rules/ts/style.mdc": "---\ndescription:\nglobs: *.ts, src/**/*.{ts,tsx}\n---\n"
                                  "- Prefer type aliases over interfaces for unions.\n",
    ".cursor/rules/always.mdc": "---\nalwaysApply: true\nglobs: lib/**\n---\n- Keep functions under 50 lines.\n",
    ".cursor/rules/db.mdc": "---\ndescription: writing database migrations\nalwaysApply: false\n---\n"
                            "- Every migration is reversible.\n",
    ".claude/rules/api.md": "---\npaths:\n  - \"src/api/**/*.py\"\n---\n# API\n\n"
                            "- Validate every request body with pydantic.\n",
    ".github/copilot-instructions.md": "- Answer in English.\n",
    ".github/instructions/py.instructions.md": "---\napplyTo: \"**/*.py,docs/**\"\n---\n"
                                              "- Use f-strings, not percent formatting.\n",
    ".github/instructions/all.instructions.md": "---\napplyTo: \"**\"\n---\n"
                                               "- Write commit subjects in the imperative.\n",
    ".cursorrules": "Prefer pnpm over npm for every package.\n",
    "node_modules/left-pad/AGENTS.md": "- A vendored rule that must never be read.\n",
    "build/CLAUDE.md": "- Build output that must never be read.\n",
    "ignored/AGENTS.md": "- An ignored rule that must never be read.\n",
    ".gitignore": "ignored/\n",
    "CLAUDE.local.md": "- My own note, private.\n",
}
EXPECTED = {  # text -> the scope of the memory it would create ([] = the whole project)
    "Always run `make lint` before pushing.": [],
    "Run the tests with pytest.": [],  # also in src/payments/CLAUDE.md: the root's has no scope, so none
    "Keep pull requests under 400 changed lines.": [],
    "Never log card numbers.": ["src/payments/**"],
    "Use the design tokens, never raw colours.": ["packages/web/**"],
    "Use server components by default.": ["web/**", "app/**/*.tsx"],
    "Prefer type aliases over interfaces for unions.": ["**/*.ts", "src/**/*.{ts,tsx}"],
    "Keep functions under 50 lines.": [],
    "Every migration is reversible.": [],
    "Validate every request body with pydantic.": ["src/api/**/*.py"],
    "Answer in English.": [],
    "Use f-strings, not percent formatting.": ["**/*.py", "docs/**"],
    "Write commit subjects in the imperative.": [],
    "Prefer pnpm over npm for every package.": [],
}


def write_tree(root, files):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_tree_is_read_whole_and_each_statement_keeps_its_files_scope(kw_memory, project):
    write_tree(project, TREE)
    dry = kw_memory.review.import_guidance(project, dry_run=True)
    assert (dry["dry_run"], dry["queued"], dry["scoped"], dry["proposals"]) == (True, len(EXPECTED), 6, [])
    assert kw_memory.review.queue() == []  # a dry run queues nothing
    done = kw_memory.review.import_guidance(project)
    queued = kw_memory.review.queue(types=["add"])
    assert {p.payload["text"]: p.payload.get("paths", []) for p in queued} == EXPECTED
    assert done["queued"] == len(EXPECTED) and done["scoped"] == 6 and done["merged"] == 1
    files = {f["file"]: f for f in done["files"]}
    assert set(files) == {rel for rel in TREE if rel.endswith((".md", ".mdc", ".cursorrules"))} - {
        "node_modules/left-pad/AGENTS.md", "build/CLAUDE.md", "ignored/AGENTS.md", "CLAUDE.local.md"}
    assert done["private"] == ["CLAUDE.local.md"] and done["listed_by"] == "git"
    assert files["src/payments/CLAUDE.md"]["paths"] == ["src/payments/**"]
    assert (files["src/payments/CLAUDE.md"]["queued"], files["src/payments/CLAUDE.md"]["merged"]) == (1, 1)
    assert files["CLAUDE.md"]["items"] == 2  # the "@AGENTS.md" import line is not a statement
    by_text = {p.payload["text"]: p for p in queued}
    assert by_text["Every migration is reversible."].payload["applies_when"] == ["writing database migrations"]
    assert "applies_when" not in by_text["Use server components by default."].payload  # globs: not agent requested
    assert by_text["Validate every request body with pydantic."].payload["origin"] == ".claude/rules/api.md:7"
    assert by_text["Validate every request body with pydantic."].payload["context"] == "API"
    again = kw_memory.review.import_guidance(project)
    assert (again["queued"], again["pending"]) == (0, len(EXPECTED))
    assert kw_memory.review.import_guidance(project, dry_run=True)["pending"] == len(EXPECTED)
    # Approving creates the memory with the proposal's scope.
    payments = by_text["Never log card numbers."]
    assert "scoped to src/payments/**" in kw_memory.review.show(payments.id)["after"]
    created = kw_memory.review.decide(payments.id, "approve")["created"]
    assert [(s["pattern"], s["origin"]) for s in kw_memory.scopes.of([created])[created]] == \
        [("src/payments/**", "given")]
    edited = kw_memory.review.decide(by_text["Use server components by default."].id, "edit",
                                     text="Use React server components by default.")["created"]
    assert {s["pattern"] for s in kw_memory.scopes.of([edited])[edited]} == {"web/**", "app/**/*.tsx"}
    plain = kw_memory.review.decide(by_text["Answer in English."].id, "approve")["created"]
    assert kw_memory.scopes.of([plain]) == {}


def test_a_folder_outside_git_is_walked_and_vendored_folders_are_skipped(kw_memory, tmp_path):
    root = write_tree(tmp_path / "plain", {k: v for k, v in TREE.items() if not k.startswith(".cursor")})
    write_tree(root, {"other-repo/.git/HEAD": "ref: refs/heads/main\n", "other-repo/AGENTS.md": "- Not ours.\n"})
    (root / "legacy").mkdir()
    (root / "legacy" / "AGENTS.md").write_bytes(b"- fine\n- \xff broken\n")
    done = kw_memory.review.import_guidance(root)
    # One unreadable file in a folder is reported and the others are imported.
    assert "not valid UTF-8" in {f["file"]: f for f in done["files"]}["legacy/AGENTS.md"]["error"]
    texts = {p.payload["text"] for p in kw_memory.review.queue(types=["add"])}
    assert done["listed_by"] == "walk"
    assert "A vendored rule that must never be read." not in texts and "Not ours." not in texts
    assert "Build output that must never be read." not in texts
    assert "An ignored rule that must never be read." in texts  # no git: no .gitignore to honour
    assert {p.payload["text"]: p.payload.get("paths") for p in kw_memory.review.queue(types=["add"])}[
        "Never log card numbers."] == ["src/payments/**"]


def test_one_named_file_keeps_its_folders_scope_and_a_private_file_is_read_when_named(kw_memory, project,
                                                                                    monkeypatch):
    write_tree(project, TREE)
    monkeypatch.chdir(project / "src")
    done = kw_memory.review.import_guidance("payments/CLAUDE.md")
    assert done["file"] == "payments/CLAUDE.md" and done["root"] == str(project.resolve())
    assert [f["paths"] for f in done["files"]] == [["src/payments/**"]] and done["scoped"] == 2
    monkeypatch.chdir(project)
    assert kw_memory.review.import_guidance("CLAUDE.local.md")["queued"] == 1
    folder = kw_memory.review.import_guidance("packages")  # a folder: the guidance under it alone
    assert [f["file"] for f in folder["files"]] == ["packages/web/AGENTS.md"] and folder["queued"] == 1
    with pytest.raises(InvalidInput, match="cannot read"):
        kw_memory.review.import_guidance("nope/")


def test_front_matter_and_globs():
    from cairn.review.guidance import front_matter, guide, split_patterns

    assert split_patterns("src/**/*.{ts,tsx}, *.md ,'docs/**'") == ["src/**/*.{ts,tsx}", "*.md", "docs/**"]
    assert split_patterns(["a/**", "b/**,c/**", 3]) == ["a/**", "b/**", "c/**"]
    fields, body, lines = front_matter("---\nglobs: *.ts\nalwaysApply: false\n---\n- Rule.\n")
    assert (fields, body, lines) == ({"globs": "*.ts", "alwaysApply": "false"}, "- Rule.\n", 4)
    assert front_matter("# No front matter\n") == ({}, "# No front matter\n", 0)
    ruled = "---\n# Title\n\n- A rule between two rules.\n---\n"  # opens with a horizontal rule: no fields
    assert front_matter(ruled) == ({}, ruled, 0) and [i.text for i in split(ruled)] == ["A rule between two rules."]
    assert front_matter("---\n---\n- R.\n") == ({}, "- R.\n", 2)
    from cairn.review.guidance import format_of
    assert format_of(".clinerules/style.md") == "cline rule" and format_of(".clinerules/workflows/release.md") is None
    assert format_of("docs/CLAUDE.md") == "CLAUDE.md" and format_of("docs/README.md") is None
    many = ",".join(f"src/app/m{i}/**" for i in range(12))
    g = guide(".cursor/rules/many.mdc", f"---\nglobs: {many}\n---\n- Rule.\n")
    assert g.paths == ("src/app/**",) and "widened to src/app/**" in g.notes[0]
    scattered = ",".join(f"m{i}/x/**" for i in range(12))
    assert guide(".cursor/rules/s.mdc", f"---\nglobs: {scattered}\n---\n- R.\n").paths == ()
    assert guide("packages/api/.cursor/rules/x.mdc", "---\nglobs: \"*.py\"\n---\n- R.\n").paths == \
        ("packages/api/**/*.py",)  # a nested folder's rules hold in that folder
    assert guide("packages/api/.claude/rules/x.md", "- R.\n").paths == ("packages/api/**",)
    assert guide(".claude/rules/x.md", "---\npaths: \"*.md\"\n---\n- R.\n").paths == ("*.md",)  # rooted
    long = "Use this rule whenever you are asked to create, update or delete any rule of this repository at all"
    assert guide(".cursor/rules/x.mdc", f"---\ndescription: {long}\n---\n- R.\n").applies_when == ()
    windsurf = guide(".windsurf/rules/t.md", "---\ntrigger: glob\nglobs: \"*.test.ts\"\n---\n- R.\n")
    assert windsurf.paths == ("**/*.test.ts",)
    assert guide(".windsurf/rules/t.md", "---\ntrigger: always_on\nglobs: x/**\n---\n- R.\n").paths == ()
    assert guide(".clinerules/api.md", "---\npaths:\n  - src/api/**\n---\n- R.\n").paths == ("src/api/**",)
    assert guide("src/.claude/CLAUDE.md", "- R.\n").paths == ("src/**",)
    assert guide("docs/STYLE.md", "- R.\n").paths == ()  # named by hand, of no known kind: no scope
    assert guide(".github/instructions/x.instructions.md", "---\napplyTo: \"../up/**\"\n---\n- R.\n").notes
    unreadable = guide(".cursor/rules/n.mdc", "---\nglobs: 42\n---\n- R.\n")  # found by a new-user trial
    assert unreadable.paths == () and "'42' is neither a glob nor a list of globs" in unreadable.notes[0]


def test_cli_imports_the_project_when_no_path_is_given(project, monkeypatch, capsys):
    write_tree(project, TREE)
    monkeypatch.chdir(project / "src")  # from a subfolder: still the whole project
    monkeypatch.setenv("CAIRN_NO_WARM", "1")
    code, out, err = run_cli(capsys, ["import-guidance", "--dry-run"])
    assert code == 0, err
    assert f"13 guidance files under {project.resolve()}: 15 items; 14 would be queued (dry run, nothing " \
        "written) (6 scoped)" in out and "[src/payments/**]" in out
    code, out, _ = run_cli(capsys, ["review", "list"])
    assert "the review queue is empty" in out
    code, out, err = run_cli(capsys, ["import-guidance"])
    assert code == 0, err
    assert f"13 guidance files under {project.resolve()}: 15 items; 14 queued for review (6 scoped)" in out
    assert "src/payments/CLAUDE.md" in out and "[src/payments/**]" in out
    assert "CLAUDE.local.md: private, not read" in out and "node_modules" not in out
    code, out, _ = run_cli(capsys, ["import-guidance", "--json"])
    report = json.loads(out)
    assert report["queued"] == 0 and report["pending"] == 14 and report["files"][0]["file"] == ".cursorrules"
    code, out, _ = run_cli(capsys, ["review", "list", "--limit", "100"])
    assert code == 0 and "scope: src/payments/** (from src/payments/CLAUDE.md:3)" in out
