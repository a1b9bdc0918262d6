"""Regenerate docs/console.png: the console's first screen on a small, realistic scratch store.

    PYTHONPATH=engine python tools/console_screenshot.py [--out docs/console.png] [--width 1280 --height 760]

What it does, all in a temporary folder that is removed afterwards (your own stores are not touched):
a git project and its own CAIRN_HOME; a dozen memories of the kinds a real project gathers, then a
fact that contradicts one of them (which `remember` queues as a conflict proposal) and one guidance line
proposed from AGENTS.md (an `add` proposal), so two proposals wait; `cairn serve --transport http`
on a free 127.0.0.1 port; a headless Chromium (the distribution's chromium and chromedriver, driven
by Selenium, as tests/adapters/test_console.py does) that loads the console, waits until the first
screen has its ten newest memories and the waiting count, and saves the screenshot; then the browser
and the server are stopped. The server runs keyword-only (the config disables the embedding model),
so it starts in a second and needs no download; the store line says so.

Needs the test extra (selenium) and `apt-get install chromium chromium-driver`. Exits non-zero with
the server's log if the server or the page does not come up within --timeout seconds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# Oldest first, so the newest ten shown are the last ten: (kind, text, tags).
MEMORIES = [
    ("decision", "We deploy with Kamal to two Hetzner hosts behind a load balancer, because the "
                 "Heroku bill tripled after the EU move.", ["deploy"]),
    ("convention", "Branch names start with the issue number, e.g. 412-retry-webhooks.", ["git"]),
    ("fact", "The staging database is refreshed from a scrubbed production dump every Monday at 03:00 UTC.",
     ["staging", "database"]),
    ("preference", "Prefer small pull requests (under 400 changed lines) over one large one.", ["review"]),
    ("fact", "Feature flags are read from config/flags.yaml at start-up; changing one needs a restart.",
     ["flags"]),
    ("fact", "The public API allows 100 requests per minute per key.", ["api"]),
    ("insight", "Most flaky tests came from tests sharing one temp folder; each test now gets its own.",
     ["testing"]),
    ("decision", "Payments go through Stripe Checkout, not Elements, so card data never touches our servers.",
     ["payments"]),
    ("convention", "Database migrations are written with Alembic and never edited after they are merged.",
     ["database"]),
    ("fact", "The CI cache key includes the hash of uv.lock, so a dependency bump starts a cold build.", ["ci"]),
    ("preference", "Write the docs in British English.", ["docs"]),
    ("task", "Remove the legacy /v0 endpoints after the March release.", ["api"]),
    ("convention", "Run ruff and mypy before pushing; CI runs the same checks.", ["ci"]),
]
# Queued as a conflict with the 100-requests fact: the user decides which one holds.
CONFLICT = ("fact", "The public API allows 300 requests per minute per key.")
PROPOSED = ("convention", "Every endpoint validates its input with pydantic models.", "AGENTS.md › API")


def wait(predicate: Callable[[], Any], what: str, timeout: float) -> Any:
    """Poll `predicate` until it returns something truthy (backing off to 0.5 s); SystemExit after `timeout` s."""
    deadline, interval = time.monotonic() + timeout, 0.05
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise SystemExit(f"waited {timeout:.0f} s for {what}")
        time.sleep(interval)
        interval = min(interval * 1.5, 0.5)


def seed(project: Path) -> None:
    """The scratch store: MEMORIES, then CONFLICT (must be queued) and PROPOSED (must be queued)."""
    from cairn import Cairn

    with Cairn.open(cwd=project, embedder=None) as engine:
        for kind, text, tags in MEMORIES:
            engine.remember(text, kind=kind, tags=tags, detect=False)
        kind, text = CONFLICT
        if not engine.remember(text, kind=kind).conflicts:
            raise SystemExit(f"expected {text!r} to be queued as a conflict")
        kind, text, context = PROPOSED
        if engine.review.propose(text, kind=kind, context=context)["status"] != "queued":
            raise SystemExit(f"expected {text!r} to be queued")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int, proc: subprocess.Popen[bytes], log: Path) -> bool:
    if proc.poll() is not None:
        raise SystemExit(f"the server exited with {proc.returncode}:\n{log.read_text()}")
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def screenshot(url: str, out: Path, width: int, height: int, timeout: float) -> None:
    from selenium import webdriver
    from selenium.webdriver.common.by import By

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not (chromium and driver_path):
        raise SystemExit("needs Chromium and its driver: apt-get install -y chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--hide-scrollbars"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver_path))
    try:
        driver.set_page_load_timeout(timeout)
        driver.get(url)
        # --window-size sets the outer window; grow it by the frame so the page itself is width x height
        frame = driver.execute_script("return [outerWidth - innerWidth, outerHeight - innerHeight]")
        driver.set_window_size(width + frame[0], height + frame[1])
        wait(lambda: len(driver.find_elements(By.CSS_SELECTOR, "#latest li.memory")) == 10,
             "the ten newest memories", timeout)
        wait(lambda: "wait" in driver.find_element(By.ID, "pending-line").text, "the waiting count", timeout)
        out.parent.mkdir(parents=True, exist_ok=True)
        if not driver.save_screenshot(str(out)):
            raise SystemExit(f"could not write {out}")
    finally:
        driver.quit()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "console.png", help="the PNG to write")
    parser.add_argument("--width", type=int, default=1280, help="page width, CSS pixels")
    parser.add_argument("--height", type=int, default=760, help="page height, CSS pixels")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the server and page")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="cairn-console-") as tmp:
        scratch = Path(tmp)
        config = scratch / "config.yaml"
        config.write_text("embedding:\n  enabled: false\n")  # keyword-only: no model to load or download
        env = {**os.environ, "CAIRN_HOME": str(scratch / "home"), "CAIRN_CONFIG": str(config),
               "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
        env.pop("CAIRN_STORE", None)
        os.environ.update({k: env[k] for k in ("CAIRN_HOME", "CAIRN_CONFIG", "HF_HUB_OFFLINE")})
        os.environ.pop("CAIRN_STORE", None)
        project = scratch / "payments-service"
        project.mkdir()
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        seed(project)

        port = free_port()
        log = scratch / "server.log"
        with open(log, "wb") as out:
            server = subprocess.Popen([sys.executable, "-m", "cairn", "serve", "--transport", "http",
                                       "--host", "127.0.0.1", "--port", str(port)],
                                      cwd=project, env=env, stdout=out, stderr=subprocess.STDOUT)
            try:
                wait(lambda: listening(port, server, log), f"the server on port {port}", args.timeout)
                screenshot(f"http://127.0.0.1:{port}/", args.out, args.width, args.height, args.timeout)
            finally:
                server.send_signal(signal.SIGTERM)
                try:
                    server.wait(args.timeout)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait()
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes, {args.width}x{args.height})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
