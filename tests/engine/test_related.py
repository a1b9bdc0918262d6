"""Every write shows the writer the memories it may change (`related`); only a change said in words
is retired automatically; a contradiction across kinds is related and queued."""

from __future__ import annotations

import io
import json

import pytest

from cairn import render
from cairn.models import RELATED_INSTRUCTION
from cairn.memories.supersede_words import states_change

from tests.conftest import run_cli


@pytest.fixture(params=["model", "keyword"])
def engine(request):
    return request.getfixturevalue("memory" if request.param == "model" else "kw_memory")


@pytest.mark.parametrize("text", [
    "We now deploy with Kamal.",
    "We moved deployment from Heroku to Fly.io.",
    "Switched the CI to GitHub Actions.",
    "Request validation uses Valibot instead of Zod.",
    "Storybook builds are no longer published to Chromatic.",
    "Hangfire got replaced by Quartz.NET in the scheduler.",
    "Oban was retired; background jobs go through Temporal.",
    "Lorcan took over the Thursday infra sync from Thandiwe.",
    "Kasimir handed the design-authority role to Solveig.",
    "As of March 3 the careers page is served from Tigris.",
    "Geocoding proxy per-key quota raised to 300 requests per minute.",
    "Heron feature cutoff pushed to Oct 17.",
    "Telemetry in the desktop client is enabled again.",
    "The nightly fuzzing job has been resumed.",
    "Olu left; the team lead is Ben.",
])
def test_a_change_said_in_words_is_stated(text):
    assert states_change(text)


@pytest.mark.parametrize("text", [
    "The client SDK is published to PyPI.",
    "We send webhooks for order.refunded events.",
    "The CLI runs on macOS.",
    "The QA database runs MariaDB 11.4.",
    "Owner of the billing-export job: Radomir",
    "The left sidebar lists the tags.",
    "Brigid prefers written design docs over meetings.",
])
def test_another_value_of_the_same_template_is_not_stated(text):
    assert not states_change(text)


def test_another_value_of_a_template_is_related_not_retired(engine):
    npm = engine.remember("The client SDK is published to npm.")
    pypi = engine.remember("The client SDK is published to PyPI.")
    assert pypi.superseded == []
    assert [r["id"] for r in pypi.related] == [npm.memory.id]
    shown = pypi.related[0]
    assert set(shown) == {"id", "text", "kind", "date", "why"}
    assert shown["text"] == "The client SDK is published to npm." and shown["kind"] == "fact"
    assert shown["date"] == npm.memory.to_json()["valid_from_iso"][:10]
    maven = engine.remember("The client SDK is published to Maven Central.")
    assert maven.superseded == []
    assert {m.text for m in engine.list()} == {"The client SDK is published to npm.",
                                               "The client SDK is published to PyPI.",
                                               "The client SDK is published to Maven Central."}


def test_a_change_said_in_words_is_retired(engine):
    old = engine.remember("We deploy with Capistrano.")
    new = engine.remember("We now deploy with Kamal instead of Capistrano.")
    assert new.superseded == [old.memory.id]
    assert new.related == []  # nothing else is about it


def test_related_is_empty_when_nothing_is_about_the_same_subject(engine):
    engine.remember("The staging database is reset every Sunday at 02:00 UTC.")
    result = engine.remember("The user prefers commit messages in the imperative mood.")
    assert result.related == [] and "instruction" not in result.to_json()


def test_related_holds_at_most_three_most_likely_first(engine):
    for text in ("The SDK is published to npm.", "The SDK is published to PyPI.", "The SDK is published to Maven.",
                 "The SDK is published to NuGet."):
        engine.remember(text)
    result = engine.remember("The SDK is published to crates.io.")
    assert len(result.related) == 3
    assert all("SDK is published" in r["text"] for r in result.related)


def test_a_fact_contradicting_a_decision_is_related_and_queued(engine):
    decision = engine.remember("We switched the CI from CircleCI to GitHub Actions.", kind="decision")
    fact = engine.remember("Our CI runs on CircleCI.", kind="fact")
    assert fact.superseded == [] and engine.get(decision.memory.id).status == "current"
    assert [r["id"] for r in fact.related] == [decision.memory.id]
    assert fact.related[0]["kind"] == "decision" and "circleci" in fact.related[0]["why"]
    queued = engine.review.queue(types=["conflict"])
    assert [p.source_ids for p in queued] == [[decision.memory.id, fact.memory.id]]


@pytest.mark.parametrize("kinds", [("decision", "fact"), ("convention", "fact"), ("fact", "decision")])
def test_maintenance_queues_a_contradiction_across_kinds(engine, kinds):
    """A pair no write queued (written without detection, as an import does) is found by maintenance."""
    older = engine.remember("We switched the CI from CircleCI to GitHub Actions.", kind=kinds[0], detect=False)
    newer = engine.remember("Our CI runs on CircleCI.", kind=kinds[1], detect=False)
    assert engine.review.queue() == []
    report = engine.review.maintain(apply=True)
    (proposal,) = engine.review.queue(types=["conflict"])
    assert proposal.source_ids == [older.memory.id, newer.memory.id]
    assert f"a {kinds[1]} that may contradict this {kinds[0]}" in proposal.payload["reason"]
    assert report["counts"]["conflict"] == 1
    assert {m.id for m in engine.list()} == {older.memory.id, newer.memory.id}  # queued, never retired


def test_a_change_of_another_kind_is_never_retired_automatically(engine):
    fact = engine.remember("We deploy with Heroku.", kind="fact")
    decision = engine.remember("We now deploy with Fly.io instead of Heroku.", kind="decision")
    assert decision.superseded == []
    assert [r["id"] for r in decision.related] == [fact.memory.id]


def test_replacing_by_the_text_just_remembered_retires_the_related_one(engine):
    """The loop the MCP instructions teach: remember, read `related`, replace it with the same text."""
    heroku = engine.remember("We deploy with Heroku.", kind="decision")
    fly = engine.remember("We deploy with Fly.io.", kind="decision")
    assert fly.superseded == [] and heroku.memory.id in [r["id"] for r in fly.related]
    done = engine.replace(heroku.memory.id, "We deploy with Fly.io.")
    assert done.status == "duplicate" and done.memory.id == fly.memory.id and done.superseded == [heroku.memory.id]
    assert [m.id for m in engine.list()] == [fly.memory.id]
    assert [m.id for m in engine.history(fly.memory.id)] == [heroku.memory.id, fly.memory.id]


def test_replace_lists_what_else_it_may_change(engine):
    a = engine.remember("The SDK is published to npm.")
    b = engine.remember("The SDK is published to PyPI.")
    result = engine.replace(a.memory.id, "The SDK is published to npm and JSR.")
    assert result.superseded == [a.memory.id]
    assert [r["id"] for r in result.related] == [b.memory.id]


def test_the_mcp_answer_carries_related_and_one_instruction(engine):
    engine.remember("The client SDK is published to npm.")
    out = render.remembered(engine.remember("The client SDK is published to PyPI."))
    assert out["instruction"] == RELATED_INSTRUCTION and "memory_replace" in out["instruction"]
    assert [r["text"] for r in out["related"]] == ["The client SDK is published to npm."]
    alone = render.remembered(engine.remember("The office dog is called Biscuit."))
    assert "related" not in alone and "instruction" not in alone


@pytest.fixture
def cli(project, monkeypatch, capsys):
    monkeypatch.chdir(project)
    monkeypatch.setenv("CAIRN_NO_WARM", "1")

    def run(*args: str, answer: str | None = None) -> tuple[int, str, str]:
        stdin = io.TextIOWrapper(io.BytesIO((answer or "").encode()), encoding="utf-8")
        if answer is not None:  # a terminal the user answers on
            stdin.isatty = lambda: True  # type: ignore[method-assign]
        monkeypatch.setattr("sys.stdin", stdin)
        return run_cli(capsys, [*args, "--keyword-only"] if args[0] == "remember" else args)

    return run


def test_cli_json_has_related_and_the_instruction(cli):
    cli("remember", "The client SDK is published to npm.")
    code, out, _ = cli("remember", "The client SDK is published to PyPI.", "--json")
    data = json.loads(out)
    assert code == 0 and [r["text"] for r in data["related"]] == ["The client SDK is published to npm."]
    assert data["instruction"] == RELATED_INSTRUCTION


def test_cli_on_a_terminal_asks_which_one_it_replaces(cli):
    cli("remember", "We deploy with Heroku.")
    code, out, _ = cli("remember", "We deploy with Fly.io.", answer="1\n")
    assert code == 0 and "Does it replace one of these?" in out and "is superseded by" in out
    code, out, _ = cli("list", "--json")
    assert [m["text"] for m in json.loads(out)] == ["We deploy with Fly.io."]


def test_cli_on_a_terminal_enter_keeps_both(cli):
    cli("remember", "The client SDK is published to npm.")
    code, out, _ = cli("remember", "The client SDK is published to PyPI.", answer="\n")
    assert code == 0 and "Does it replace one of these?" in out
    code, out, _ = cli("list", "--json")
    assert len(json.loads(out)) == 2


def test_cli_does_not_ask_with_no_ask_or_without_a_terminal(cli):
    cli("remember", "The client SDK is published to npm.")
    code, out, _ = cli("remember", "The client SDK is published to PyPI.", "--no-ask", answer="1\n")
    assert code == 0 and "Does it replace" not in out and "related 1." in out
    code, out, _ = cli("remember", "The client SDK is published to Maven Central.")  # stdin: not a terminal
    assert code == 0 and "Does it replace" not in out and "--replaces" in out
    code, out, _ = cli("list", "--json")
    assert len(json.loads(out)) == 3


@pytest.mark.parametrize("fixture", ["memory", "kw_memory"])
def test_two_memories_sharing_only_a_redaction_marker_are_not_restatements(fixture, request):
    m = request.getfixturevalue(fixture)
    m.remember("the prod token is tkn_8fJ2kQ9xLmN4pR7sT1vW3yZ5aB6cD0eF", kind="fact")
    second = m.remember("bare token test tkn_9aK3mQ8xLmN4pR7sT1vW3yZ5aB6cD0eZ here", kind="fact")
    assert "[REDACTED:" in second.memory.text  # both stored redacted: the marker is all they share
    assert second.status == "created"
    assert m.review.queue() == []


# -- issue 31: a new value of the same slot relates to the current one ---------------------------------------
def test_a_new_deploy_target_relates_to_the_current_one_with_little_shared_wording(engine):
    heroku = engine.remember("We deploy with Heroku.", kind="decision").memory
    fly = engine.remember("We moved deployment from Heroku to Fly.io.", kind="decision")
    assert fly.superseded == [heroku.id]  # names the old value it replaces: retired
    cloud_run = engine.remember("Our deploy target is now Google Cloud Run.", kind="decision")
    (first, *_) = cloud_run.related
    assert first["id"] == fly.memory.id and "deploy target" in first["why"]
    assert engine.get(fly.memory.id).status == "current"  # related, never retired on a slot alone


def test_slot_changes_relate_through_remember_keyword_only(kw_memory):
    from pathlib import Path

    import yaml

    path = Path(__file__).parents[1] / "data" / "slot_changes.yaml"
    pairs = yaml.safe_load(path.read_text(encoding="utf-8"))["pairs"]
    found = 0
    for pair in pairs:
        written = [kw_memory.remember(t, kind=pair["kind"]).memory.id for t in [*pair.get("chain", []), pair["old"]]]
        result = kw_memory.remember(pair["new"], kind=pair["kind"])
        found += written[-1] in result.superseded or written[-1] in {r["id"] for r in result.related}
        for memory_id in {*written, result.memory.id}:
            kw_memory.forget(memory_id)
    assert found / len(pairs) >= 0.95


@pytest.mark.parametrize("old, new", [
    ("Errors are reported to Sentry.", "Our logs go to Papertrail."),  # two slots, no change
    ("Run `make test` before pushing.", "Use pnpm to install packages."),
    ("The team uses Python 3.12 for scripts.", "Node 22 runs the web app."),
    ("The mailer component is owned by team 8.", "The cache component is owned by team 9."),  # a template
])
def test_values_of_different_slots_are_not_a_slot_change(old, new):
    from cairn.memories.slots import changed_slot

    assert changed_slot(old, new) is None


def test_another_version_of_one_name_is_a_slot_change():
    from cairn.memories.slots import changed_slot

    reason = changed_slot("CI runs on Python 3.11.", "CI runs on Python 3.12.")
    assert reason == "another version of python (3.11 -> 3.12)"


def test_one_clock_per_write_a_replaced_memory_ends_when_its_successor_begins(engine):
    """Issue 31: the terminal's "does it replace one of these?" replaces by the text just written."""
    old = engine.remember("Release notes are drafted in Google Docs", kind="convention").memory
    new = engine.remember("Release notes are drafted in Notion", kind="convention").memory
    engine.replace(old.id, new.text)
    retired, successor = engine.get(old.id), engine.get(new.id)
    assert retired.superseded_by == new.id and retired.valid_to == successor.valid_from
