"""The review console in a real headless Chromium (the distribution's package), driven by Selenium.

`cairn serve --transport http` on a store with a superseded memory, a queued review proposal and a
captured session: the test loads the page, checks its first screen (the newest memories and how many
proposals wait, before any click), searches, opens a history, approves the proposal from the review
queue (with its evidence), forgets a memory (accepting the confirmation), searches sessions, and
checks labels and keyboard use. Screenshots go to the test's output folder (tmp_path/screenshots);
docs/console.png is made by tools/console_screenshot.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cairn import Cairn
from cairn.models import TurnDraft

from tests.conftest import WAIT_S, git_init, wait_for
from tests.serving import Server, keyword_only_env

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = [pytest.mark.chromium, pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs Chromium and its driver from the distribution: apt-get install -y chromium chromium-driver")]
webdriver = pytest.importorskip("selenium.webdriver", reason="needs selenium (the test extra: pip install -e .[test])")
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402


@pytest.fixture
def seeded(tmp_path, cairn_home):
    project = git_init(tmp_path / "project")
    with Cairn.open(cwd=project, embedder=None) as engine:
        old = engine.remember("The API is served by Flask", kind="decision", tags=["api"], detect=False).memory.id
        new = engine.replace(old, "The API is served by FastAPI").memory.id
        # a possible conflict `remember` reports: it joins the review queue as a proposal
        engine.remember("Run the linter before pushing.", kind="convention")
        assert engine.remember("We might run the linter before pushing.", kind="convention").conflicts
        engine.remember("Release notes live in CHANGELOG.md", kind="fact", detect=False)
        engine.sessions.add_turns("s1", [
            TurnDraft(uuid="u1", role="user", text="why does the linter reject snake_case_module?", at=1_000),
            TurnDraft(uuid="u2", role="assistant", text="ruff's N999 rule; renamed the module", at=2_000),
        ], source="claude")
    return project, old, new


@pytest.fixture
def browser(tmp_path):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000",
                "--disable-gpu"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(WAIT_S)
    yield driver
    driver.quit()


def texts(driver, css: str) -> list[str]:
    """The text of each element matching `css`, read in one script: the console replaces lists whole,
    so element handles held across a redraw go stale."""
    return driver.execute_script("return [...document.querySelectorAll(arguments[0])].map(e => e.innerText)", css)


def test_console_search_history_verdict_forget_sessions(seeded, browser, tmp_path):
    project, old, new = seeded
    shots = tmp_path / "screenshots"
    shots.mkdir()
    server = Server(["--transport", "http"], cwd=project, env=keyword_only_env(tmp_path), log=tmp_path / "server.log")
    try:
        browser.get(f"http://127.0.0.1:{server.port}/")
        wait_for(lambda: "4 current memories" in browser.find_element(By.ID, "store-line").text,
                 what="the store line")
        # the first screen, with no click: the current memories newest first, and the waiting proposal
        wait_for(lambda: len(texts(browser, "#latest li")) == 4, what="the newest memories on the first screen")
        assert texts(browser, "#latest li .text") == [
            "Release notes live in CHANGELOG.md", "We might run the linter before pushing.",
            "Run the linter before pushing.", "The API is served by FastAPI"]
        wait_for(lambda: browser.find_element(By.ID, "pending-line").text
                 == "1 review proposal waits for your verdict.", what="the waiting proposal's count")
        assert texts(browser, "#memories li") == []  # the search list fills on a search

        # search (recall), from the keyboard: type, then Enter submits the form
        box = browser.find_element(By.ID, "query")
        box.send_keys("which framework serves the API", Keys.ENTER)
        wait_for(lambda: [t for t in texts(browser, "#memories li .text")] == ["The API is served by FastAPI"],
                 what=lambda: f"the search hit; got {texts(browser, '#memories li .text')}")

        # history: both versions, with valid and transaction times
        browser.find_element(By.CSS_SELECTOR, f'#memories li[data-id="{new}"] '
                                              f'button[aria-label="History of {new}"]').click()
        wait_for(lambda: len(texts(browser, "#history tbody tr")) == 2, what="the history rows")
        assert browser.execute_script(
            "return [...document.querySelectorAll('#history tbody tr')].map(r => r.dataset.id)") == [old, new]
        cells = browser.execute_script("return [...document.querySelectorAll('#history tbody tr')]"
                                       ".map(r => [...r.cells].map(c => c.innerText))")
        assert cells[0][1] == "superseded" and cells[0][5] != "—" and cells[1][1] == "current" and cells[1][5] == "—"
        browser.save_screenshot(str(shots / "history.png"))

        # the review queue: one proposal with its evidence; a verdict recorded from its button
        browser.find_element(By.ID, "review-load").click()
        wait_for(lambda: len(texts(browser, "#review li.proposal-row")) == 1, what="the review proposal")
        (row,) = texts(browser, "#review li.proposal-row")
        assert "conflict" in row and "Run the linter before pushing." in row and \
            "We might run the linter before pushing." in row and "approve:" in row, row
        pid = browser.find_element(By.CSS_SELECTOR, "#review li.proposal-row").get_attribute("data-proposal")
        assert [b.get_attribute("data-verdict") for b in browser.find_elements(
            By.CSS_SELECTOR, "#review li.proposal-row button")] == ["approve", "reject", "edit"]
        # one radio per memory: the newer stays by default; the user chooses the older one instead
        radios = browser.find_elements(By.CSS_SELECTOR, "#review li.proposal-row input[type=radio]")
        assert [r.is_selected() for r in radios] == [False, True]
        radios[0].click()
        wait_for(lambda: "1 pending · 0 cold" in browser.find_element(By.ID, "review-status").text,
                 what="the queue's counts")
        browser.save_screenshot(str(shots / "review.png"))
        browser.find_element(By.CSS_SELECTOR, '#review li.proposal-row button[data-verdict="approve"]').click()
        wait_for(lambda: "Verdict approve on conflict proposal: applied." in browser.find_element(By.ID, "notice").text,
                 what=lambda: f"the verdict notice; got {browser.find_element(By.ID, 'notice').text!r}")
        wait_for(lambda: not texts(browser, "#review li.proposal-row"), what="an empty queue")
        wait_for(lambda: browser.find_element(By.ID, "pending-line").text == "No review proposals wait.",
                 what="the first screen's count after the verdict")
        assert not browser.find_element(By.ID, "review-open").is_displayed()
        code, _, queue = server.request("GET", "/v1/review/proposals")
        assert code == 200 and queue["proposals"] == []
        code, _, applied = server.request("GET", "/v1/review/proposals?state=applied")
        (done,) = applied["proposals"]
        assert (done["id"], done["decided_by"], done["result"]["verdict"]) == (pid, "http", "approve")
        older, newer = (s["id"] for s in done["sources"])
        code, _, body = server.request("GET", f"/v1/memories/{newer}")
        assert body["memory"]["status"] == "superseded" and body["memory"]["superseded_by"] == older

        # forget, with its confirmation accepted
        box.clear()
        box.send_keys("CHANGELOG", Keys.ENTER)
        wait_for(lambda: texts(browser, "#memories li .text") == ["Release notes live in CHANGELOG.md"],
                 what="the CHANGELOG memory")
        target = browser.find_element(By.CSS_SELECTOR, "#memories li").get_attribute("data-id")
        browser.find_element(By.CSS_SELECTOR, f'button[aria-label="Forget {target}"]').click()
        alert = wait_for(lambda: _alert(browser), what="the confirmation")
        assert "for good" in alert.text
        alert.accept()
        wait_for(lambda: f"Forgot {target}." in browser.find_element(By.ID, "notice").text, what="the forget notice")
        code, _, body = server.request("GET", f"/v1/memories/{target}")
        assert body["memory"]["status"] == "forgotten" and body["memory"]["text"] is None
        wait_for(lambda: "Release notes live in CHANGELOG.md" not in texts(browser, "#latest li .text"),
                 what="the forgotten memory gone from the first screen")

        # sessions search
        browser.find_element(By.ID, "sessions-query").send_keys("snake_case_module", Keys.ENTER)
        wait_for(lambda: any("snake_case_module" in t for t in texts(browser, "#sessions li .text")),
                 what="the session hit")
        browser.save_screenshot(str(shots / "sessions.png"))
    finally:
        server.stop()
    assert sorted(p.name for p in shots.iterdir()) == ["history.png", "review.png", "sessions.png"]


def _alert(driver):
    try:
        alert = driver.switch_to.alert
        alert.text  # noqa: B018 - raises while there is no alert yet
        return alert
    except Exception:
        return None


def test_accessibility_smoke(seeded, browser, tmp_path):
    project, _, _ = seeded
    server = Server(["--transport", "http"], cwd=project, env=keyword_only_env(tmp_path), log=tmp_path / "server.log")
    try:
        browser.get(f"http://127.0.0.1:{server.port}/")
        wait_for(lambda: len(texts(browser, "#latest li")) == 4, what="the newest memories listed")
        assert browser.find_element(By.TAG_NAME, "html").get_attribute("lang") == "en"
        # every visible form control has a label; every button says what it does
        unlabeled = browser.execute_script("""
            return [...document.querySelectorAll('input, select')]
              .filter(e => e.offsetParent !== null && e.type !== 'hidden')
              .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label'))
              .map(e => e.id || e.outerHTML);""")
        assert unlabeled == []
        nameless = browser.execute_script("""
            return [...document.querySelectorAll('button')]
              .filter(b => !(b.textContent.trim() || b.getAttribute('aria-label'))).map(b => b.outerHTML);""")
        assert nameless == []
        # keyboard: Tab walks through the first screen (the review button, each History button) and
        # then the search form, in order, and focus is visible where it lands
        order: list[str] = []
        for _ in range(20):  # a date input takes one Tab per part (month, day, year)
            ActionChains(browser).send_keys(Keys.TAB).perform()
            focused = browser.switch_to.active_element
            name = focused.get_attribute("id") or focused.text
            if not order or order[-1] != name:
                order.append(name)
            if name == "Search":
                break
        assert order == ["review-open", "History", "query", "kind", "tag", "as-of", "superseded", "Search"], order
        outline = browser.execute_script("return getComputedStyle(document.activeElement).outlineStyle")
        assert outline != "none"
        # the live region announces results and errors
        assert browser.find_element(By.ID, "notice").get_attribute("aria-live") == "polite"
    finally:
        server.stop()


# A dozen memories, oldest first, and two proposals: the first screen shows the ten newest.
DOZEN = [("decision", "We deploy with Kamal to two Hetzner hosts"),
         ("convention", "Branch names start with the issue number"),
         ("fact", "The staging database is refreshed from production every Monday"),
         ("preference", "Prefer small pull requests over large ones"),
         ("task", "Move the cron jobs to the worker"),
         ("insight", "Most flaky tests came from shared temp folders"),
         ("fact", "Feature flags are read from flags.yaml"),
         ("decision", "Payments go through Stripe Checkout, not Elements"),
         ("convention", "Migrations are written with Alembic and never edited after merge"),
         ("fact", "The CI cache key includes the lock file's hash"),
         ("preference", "Use British spelling in the docs"),
         ("task", "Remove the legacy /v0 endpoints after the March release")]


def test_the_first_screen_shows_the_newest_memories_and_what_waits_for_review(tmp_path, cairn_home, browser):
    project = git_init(tmp_path / "project")
    with Cairn.open(cwd=project, embedder=None) as engine:
        for kind, text in DOZEN:
            engine.remember(text, kind=kind, detect=False)
        for text in ("Every endpoint validates its input with pydantic", "Logs are JSON lines on stdout"):
            assert engine.review.propose(text, kind="convention", context="AGENTS.md")["status"] == "queued"
    server = Server(["--transport", "http"], cwd=project, env=keyword_only_env(tmp_path), log=tmp_path / "server.log")
    try:
        browser.get(f"http://127.0.0.1:{server.port}/")
        # no click: the ten newest, newest first, each with its kind, day and text; the count waiting
        wait_for(lambda: len(texts(browser, "#latest li")) == 10, what="the ten newest memories")
        rows = browser.execute_script("""return [...document.querySelectorAll('#latest li')].map(li =>
            [li.querySelector('.kind').innerText, li.querySelector('time').getAttribute('datetime'),
             li.querySelector('time').innerText, li.querySelector('.text').innerText])""")
        assert [(kind.lower(), text) for kind, _, _, text in rows] == list(reversed(DOZEN))[:10]
        assert all(iso.startswith(shown) and len(shown) == 10 for _, iso, shown, _ in rows), rows
        wait_for(lambda: browser.find_element(By.ID, "pending-line").text
                 == "2 review proposals wait for your verdict.", what="the waiting proposals' count")
        assert browser.find_element(By.ID, "review-open").is_displayed()
        assert not texts(browser, "#review li.proposal-row")  # the queue itself loads on demand
        browser.save_screenshot(str(tmp_path / "first-screen.png"))

        # its button opens the review queue, with the focus there
        browser.find_element(By.ID, "review-open").click()
        wait_for(lambda: len(texts(browser, "#review li.proposal-row")) == 2, what="the two proposals")
        assert browser.switch_to.active_element.get_attribute("id") == "review-title"
    finally:
        server.stop()


def test_the_console_asks_for_a_token_when_one_is_required(seeded, browser, tmp_path):
    from cairn.adapters import tokens

    project, _, _ = seeded
    secret, _ = tokens.create("console")
    server = Server(["--transport", "http"], cwd=project, env=keyword_only_env(tmp_path), log=tmp_path / "server.log")
    try:
        browser.get(f"http://127.0.0.1:{server.port}/")
        wait_for(lambda: browser.find_element(By.ID, "token-form").is_displayed(), what="the token form")
        assert "unauthorized" in browser.find_element(By.ID, "notice").text
        browser.find_element(By.ID, "token").send_keys(secret, Keys.ENTER)
        wait_for(lambda: "4 current memories" in browser.find_element(By.ID, "store-line").text,
                 what="the store line after the token")
    finally:
        server.stop()


def test_screenshot_in_docs_exists():
    assert (Path(__file__).resolve().parents[2] / "docs" / "console.png").stat().st_size > 10_000
