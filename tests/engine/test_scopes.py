"""Path and command scopes (issue 30, item 1): given, inherited, learned from what a session touched,
found by the paths of the work, edited and reset; on SQLite and Postgres."""

from __future__ import annotations

import pytest

from cairn import InvalidMemory, NotCurrent, tool_context
from cairn.memories.scopes import (Touch, commands_of, learned_patterns, matches, normalise_pattern, path_arguments,
                          prefix_of, relative)

from tests.conftest import BACKENDS


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


# -- patterns -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("given", "stored"), [
    ("src/payments/", "src/payments/**"), ("./src//api/*.py", "src/api/*.py"), ("/docs", "docs"),
    ("cmd:  npm   run build", "cmd:npm run build"), ("src\\win\\x.cs", "src/win/x.cs"),
])
def test_patterns_are_normalised(given, stored):
    assert normalise_pattern(given) == stored


@pytest.mark.parametrize(("bad", "message"), [
    ("../elsewhere/**", "leaves the project"), ("**", "whole project"), ("", "whole project"),
    ("cmd:", "names no command"), ("x" * 201, "longer than 200"),
])
def test_bad_patterns_are_refused_with_the_reason(bad, message):
    with pytest.raises(InvalidMemory, match=message):
        normalise_pattern(bad)


@pytest.mark.parametrize(("pattern", "path", "expected"), [
    ("src/payments/**", "src/payments/charge.py", True),
    ("src/payments/**", "src/payments/deep/er/x.py", True),
    ("src/payments/**", "src/paymentsx/y.py", False),
    ("src/payments", "src/payments/charge.py", True),   # a literal folder covers what is under it
    ("src/payments/charge.py", "src/payments/charge.py", True),
    ("**/*.tsx", "web/App.tsx", True), ("**/*.tsx", "App.tsx", True), ("**/*.tsx", "web/App.ts", False),
    ("packages/{api,web}/**", "packages/web/x.ts", True), ("packages/{api,web}/**", "packages/cli/x.ts", False),
    ("src/payments/**", "src/payments/", True), ("src/**", "src/payments/", True), ("**/*.py", "src/", False),
    ("cmd:npm", "cmd:npm run build", True), ("cmd:npm run build", "cmd:npm", False),
    # Next.js / SvelteKit route folders: a bracketed segment is the name, not a class of its letters
    ("app/[slug]/**", "app/[slug]/page.tsx", True), ("app/[slug]/**", "app/x/page.tsx", False),
    ("app/[slug]/**", "app/s/page.tsx", False), ("app/[slug]/**", "app/g/x.tsx", False),
    ("src/routes/[id]/+page.svelte", "src/routes/[id]/+page.svelte", True),
    ("pages/[...all].tsx", "pages/[...all].tsx", True), ("pages/[[...opt]]/a.ts", "pages/[[...opt]]/a.ts", True),
    ("pages/[id].tsx", "pages/i.tsx", False),
    ("src/[Mm]akefile", "src/makefile", True), ("src/[0-9]x.py", "src/3x.py", True), ("src/[!_]*.py", "src/a.py", True),
])
def test_matching(pattern, path, expected):
    assert matches(pattern, path) is expected


def test_prefixes_are_the_literal_folders():
    assert prefix_of("src/payments/**") == "src/payments/"
    assert prefix_of("**/*.tsx") == ""
    assert prefix_of("packages/{a,b}/**") == "packages/"
    assert prefix_of("src/payments") == "src/"
    assert prefix_of("cmd:pytest") == "cmd:pytest"


def test_paths_are_made_relative_to_the_project_and_outside_ones_dropped(tmp_path):
    assert relative(str(tmp_path / "src" / "a.py"), tmp_path) == "src/a.py"
    assert relative("src/./b/../a.py", tmp_path) == "src/a.py"
    assert relative("/etc/hosts", tmp_path) is None
    assert relative("", tmp_path) is None


@pytest.mark.parametrize(("line", "expected"), [
    ("pytest -x tests/test_a.py", ["pytest"]),
    ("FOO=1 uv run pytest -q", ["pytest"]),
    ("npm run build && npx eslint .", ["npm", "npm run", "npm run build", "eslint"]),
    ("python -m alembic upgrade head", ["alembic", "alembic upgrade"]),
    ("sudo git rebase -i main | cat", ["git", "git rebase", "cat"]),
    ("echo 'unterminated", ["echo"]),
])
def test_commands_of_a_shell_line(line, expected):
    assert commands_of(line) == expected


def test_path_arguments_of_a_shell_line():
    assert path_arguments("pytest tests/test_x.py::test_y -k 'a or b' --cov=src") == ["tests/test_x.py"]
    assert path_arguments("ls *.py") == []


def test_learning_from_files_of_one_folder_reaches_its_siblings_and_less_further_up():
    now = 10_000_000
    learned = dict(learned_patterns([Touch("svc/pay/api/charge.py", "read", now)], now=now))
    assert learned["svc/pay/api/charge.py"] == 1.0
    assert learned["svc/pay/api/**/*.py"] > learned["svc/pay/**/*.py"] > learned["svc/**/*.py"]
    assert "svc/pay/api/**" in learned and learned["svc/pay/api/**"] < 0.5  # another type beside it: less likely
    assert not any(p in learned for p in ("**", "**/*.py"))  # never the whole project from one file


def test_files_in_two_folders_make_their_common_folder_observed():
    now = 10_000_000
    one = dict(learned_patterns([Touch("svc/pay/api/a.py", "read", now)], now=now))
    two = dict(learned_patterns([Touch("svc/pay/api/a.py", "read", now), Touch("svc/pay/db/b.py", "read", now)],
                                now=now))
    assert two["svc/pay/**/*.py"] > one["svc/pay/**/*.py"]


def test_touches_older_than_the_window_teach_nothing():
    now = 10_000_000_000
    assert learned_patterns([Touch("a/b.py", "read", now - 3_600_000)], now=now) == []


# -- the store: given, inherited, learned, looked up, edited, reset, erased ------------------------------
def test_given_scopes_are_stored_and_found_by_a_path_under_them(kw_memory):
    m = kw_memory.remember("Amounts are integer cents", kind="convention", paths=["src/payments/"]).memory
    kw_memory.remember("Unrelated rule about docs", kind="convention", paths=["docs/**"])
    assert list(kw_memory.scopes.of([m.id])[m.id]) == [{"pattern": "src/payments/**", "origin": "given", "weight": 1.0}]
    found = kw_memory.scopes.matching(["src/payments/api/charge.py"])
    assert [mem.id for mem, _ in found] == [m.id]
    assert kw_memory.scopes.matching(["src/other.py"]) == []


def test_an_absolute_path_inside_the_project_is_stored_relative_to_it(kw_memory):
    root = kw_memory.choice.project_root
    m = kw_memory.remember("Amounts are integer cents", kind="convention",
                           paths=[f"{root}/src/payments/charge.py", "/docs/**"]).memory
    assert [s["pattern"] for s in kw_memory.scopes.of([m.id])[m.id]] == ["docs/**", "src/payments/charge.py"]
    assert [mem.id for mem, _ in kw_memory.scopes.matching(["src/payments/charge.py"])] == [m.id]
    assert kw_memory.scopes.set(m.id, [f"{root}/web/"]) == ["web/**"]
    proposal = kw_memory.review.propose("Docs use sentence case", paths=[f"{root}/docs/"])["proposal"]
    assert proposal["payload"]["paths"] == ["docs/**"]


def test_a_bad_scope_writes_nothing(kw_memory):
    with pytest.raises(InvalidMemory, match="leaves the project"):
        kw_memory.remember("Amounts are integer cents", paths=["../x"])
    with pytest.raises(InvalidMemory, match="a list of globs"):
        kw_memory.remember("Amounts are integer cents", paths="src/")
    assert kw_memory.counts()["total"] == 0


def test_a_replacement_inherits_the_scopes_unless_it_gives_its_own(kw_memory):
    old = kw_memory.remember("Amounts are integer cents", kind="convention", paths=["src/payments/**"]).memory
    new = kw_memory.replace(old.id, "Amounts are integer cents in an int64").memory
    assert [s["pattern"] for s in kw_memory.scopes.of([new.id])[new.id]] == ["src/payments/**"]
    newer = kw_memory.replace(new.id, "Amounts are Decimal", paths=["src/money/**"]).memory
    assert [s["pattern"] for s in kw_memory.scopes.of([newer.id])[newer.id]] == ["src/money/**"]
    assert [m.id for m, _ in kw_memory.scopes.matching(["src/payments/x.py"])] == []  # retired ones never come


def test_a_memory_written_in_a_session_learns_what_the_session_touched(kw_memory):
    kw_memory.scopes.touch("S1", [("src/billing/invoice.py", "read"), ("src/billing/tax.py", "edit")])
    m = kw_memory.remember("Invoices are immutable once sent", kind="convention", session_id="S1").memory
    scopes = {s["pattern"]: s for s in kw_memory.scopes.of([m.id])[m.id]}
    assert scopes["src/billing/invoice.py"]["origin"] == "learned"
    assert "src/billing/**/*.py" in scopes
    found = kw_memory.scopes.matching(["src/billing/credit.py"])  # a sibling
    assert [mem.id for mem, _ in found] == [m.id]
    assert kw_memory.scopes.matching(["docs/index.md"]) == []


def test_learning_again_strengthens_and_given_scopes_are_never_overwritten(kw_memory):
    m = kw_memory.remember("Run migrations with alembic", kind="convention", paths=["db/**"]).memory
    kw_memory.scopes.touch("S1", [("db/env.py", "read")])
    kw_memory.scopes.learn([m.id], "S1", weight=0.5)
    first = {s["pattern"]: s["weight"] for s in kw_memory.scopes.of([m.id])[m.id]}
    kw_memory.scopes.learn([m.id], "S1", weight=0.5)
    second = {s["pattern"]: s["weight"] for s in kw_memory.scopes.of([m.id])[m.id]}
    assert second["db/env.py"] > first["db/env.py"]
    assert kw_memory.scopes.of([m.id])[m.id][0] == {"pattern": "db/**", "origin": "given", "weight": 1.0}


def test_scopes_are_edited_and_learned_ones_reset(kw_memory):
    kw_memory.scopes.touch("S1", [("a/b.py", "read")])
    m = kw_memory.remember("A rule", kind="convention", session_id="S1", paths=["a/**"]).memory
    assert kw_memory.scopes.set(m.id, ["b/", "cmd:make"]) == ["b/**", "cmd:make"]
    origins = {s["pattern"]: s["origin"] for s in kw_memory.scopes.of([m.id])[m.id]}
    assert origins["b/**"] == "given" and "a/**" not in origins and origins["a/b.py"] == "learned"
    assert kw_memory.scopes.reset([m.id]) > 0
    assert {s["origin"] for s in kw_memory.scopes.of([m.id])[m.id]} == {"given"}
    kw_memory.forget(m.id)
    assert kw_memory.scopes.of([m.id]) == {}
    with pytest.raises(NotCurrent):
        kw_memory.scopes.set(m.id, ["c/"])


def test_a_session_keeps_its_most_recent_touches(kw_memory):
    from cairn.memories import scope_index

    kw_memory.scopes.touch("S1", [(f"f{i}.py", "read") for i in range(scope_index.TOUCH_KEEP + 20)], at=1)
    kw_memory.scopes.touch("S1", [("last.py", "edit")], at=2)
    touched = kw_memory.scopes.touched("S1")
    assert len(touched) <= scope_index.TOUCH_KEEP and touched[0].path == "last.py"


def test_commands_are_scopes_too(kw_memory):
    m = kw_memory.remember("Migrations: one per PR", kind="convention", paths=["cmd:alembic"]).memory
    assert [x.id for x, _ in kw_memory.scopes.matching(["cmd:alembic upgrade"])] == [m.id]
    assert kw_memory.scopes.matching(["cmd:pytest"]) == []


def test_tool_context_lists_each_memory_once_within_its_budget(kw_memory):
    a = kw_memory.remember("Amounts are integer cents", kind="convention", paths=["src/payments/**"]).memory
    text = tool_context(kw_memory, ["src/payments/charge.py"])
    assert text is not None and f"[mem:{a.id}]" in text and "src/payments/charge.py" in text
    assert tool_context(kw_memory, ["src/payments/charge.py"], exclude={a.id}) is None
    assert tool_context(kw_memory, ["README.md"]) is None
    assert tool_context(kw_memory, ["src/payments/charge.py"], budget=20) is None


def test_scopes_work_on_both_backends(backend, use_backend, project):
    from cairn import Cairn

    with Cairn.open(cwd=project, embedder=None, create=True) as memory:
        m = memory.remember("Amounts are integer cents", kind="convention", paths=["src/payments/**"]).memory
        memory.scopes.touch("S1", [("src/payments/charge.py", "read")])
        n = memory.remember("Refunds go through the ledger", kind="convention", session_id="S1").memory
        found = [x.id for x, _ in memory.scopes.matching(["src/payments/refund.py"])]
        assert found[0] == m.id and n.id in found
        assert memory.scopes.reset(None) > 0
