"""Latency of Cairn's UserPromptSubmit, SessionStart or PreToolUse hook, as whole processes as Claude Code runs them.

Builds a store of N realistic memories (default 10,000) through the engine, then runs
`hooks/cairn-hook UserPromptSubmit` with the hook's stdin JSON and Claude Code's environment, for
two paths:
- warm: the per-user warm process is running with the model loaded (hybrid recall);
- cold: no warm process exists (CAIRN_NO_WARM=1 keeps it from being started, so every run is
  cold): the hook answers keyword-only by itself.
Each run also times `python -c pass` (the bare interpreter, same count) as the baseline, so a busy
machine's figures can be read as ratios. Prints p50/p95/max in milliseconds per path, the p95 as a
multiple of the baseline's, the median over --runs repetitions, and the load average.

    python bench/hook_latency.py [--memories 10000] [--prompts 100] [--runs 3] [--work DIR]
                                 [--event UserPromptSubmit|SessionStart]

--event SessionStart times the session brief instead: each call a new session starting up.
--event PreToolUse times tool time: Read calls on files of the store's scoped folders (a third of
the memories are scoped to one of 360 folders), one session, so what it injected is not again.
Its cold path here runs the engine in the hook process (CAIRN_NO_WARM=1), the worst case; in real
use a cold tool hook starts the warm process and answers nothing at once.

--work DIR keeps the store there and reuses it on the next call (building 10,000 memories takes
minutes on a busy machine); run another checkout's copy of this script with the same DIR to
compare two versions of the code on one store.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "engine"))

SUBJECTS = ["the API", "the web app", "the billing service", "the worker queue", "the auth service", "the CLI",
            "the mobile client", "the search index", "the data pipeline", "the admin console", "the gateway"]
TOOLS = ["pytest", "vitest", "Postgres 16", "Redis", "Kafka", "Terraform", "Kamal", "GitHub Actions", "Sentry",
         "OpenTelemetry", "ruff", "mypy", "Docker", "Helm", "SQLite", "Celery", "FastAPI", "Django", "React"]
TEMPLATES = [
    "We decided that {s} uses {t} because the team already knows it and it cut build times by {n}%.",
    "Convention: every change to {s} needs a test with {t} and a review from someone on the {t2} rota.",
    "The user prefers {t} over {t2} for {s}; keep functions short and avoid global state where possible.",
    "Fact: {s} runs on port {p} in staging and talks to {t} through a connection pool of {n} connections.",
    "Open task: migrate {s} from {t2} to {t} before the {n}th; the old path stays behind a feature flag.",
    "Insight: most incidents in {s} came from {t} timeouts; we raised the limit to {n} seconds after review.",
]
PROMPTS = [
    "how do we deploy {s}?", "which test runner does {s} use?", "why did we pick {t} for {s}?",
    "fix the flaky test in {s}", "what port does {s} listen on in staging?", "add retries around the {t} client",
    "write a migration for {s}", "what should I know before touching {s}?", "refactor the {t} config in {s}",
    "explain the incident history of {s}",
]


def memory_text(rng: random.Random) -> str:
    return rng.choice(TEMPLATES).format(s=rng.choice(SUBJECTS), t=rng.choice(TOOLS), t2=rng.choice(TOOLS),
                                        n=rng.randint(2, 99), p=rng.randint(3000, 9999))


def build_store(home: Path, project: Path, count: int) -> None:
    from cairn import Cairn, Draft

    rng = random.Random(7)
    texts = list(dict.fromkeys(f"{memory_text(rng)} (#{i})" for i in range(count)))
    kinds = ["decision", "convention", "preference", "fact", "task", "insight"]
    with Cairn.open(cwd=project) as memory:
        for start in range(0, len(texts), 512):
            memory.remember_many([Draft(t, kind=kinds[i % 6],
                                        paths=(_folder(start + i) + "**",) if i % 3 == 0 else ())
                                  for i, t in enumerate(texts[start:start + 512])], detect=False)
        assert memory.counts()["current"] == len(texts)


EVENT = "UserPromptSubmit"  # set by main (--event)


CALLS = [0]
# Session ids of one measurement: a session remembers what it was shown, so ids reused from an
# earlier measurement (or another version) would make the injected share say what ran before.
RUN = [""]


def _folder(i: int) -> str:
    return f"services/svc{i % 40}/mod{i % 9}/"


def run_hook(env: dict[str, str], prompt: str) -> tuple[float, str]:
    if EVENT == "PreToolUse":
        n = zlib.crc32(prompt.encode()) % 360
        path = f"{env['CLAUDE_PROJECT_DIR']}/{_folder(n)}handler_{n}.py"
        CALLS[0] += 1  # ten calls a session: some memories are left out as injected, the budget lasts
        payload = json.dumps({"session_id": f"bench-tools-{RUN[0]}-{CALLS[0] // 10}", "hook_event_name": EVENT,
                              "tool_name": "Read",
                              "tool_input": {"file_path": path}, "cwd": env["CLAUDE_PROJECT_DIR"],
                              "transcript_path": "/dev/null"})
    elif EVENT == "SessionStart":
        payload = json.dumps({"session_id": f"bench-{time.monotonic_ns()}", "source": "startup",
                              "hook_event_name": EVENT, "cwd": env["CLAUDE_PROJECT_DIR"],
                              "transcript_path": "/dev/null"})
    else:
        payload = json.dumps({"session_id": f"bench-{RUN[0]}", "prompt": prompt, "hook_event_name": EVENT,
                              "cwd": env["CLAUDE_PROJECT_DIR"], "transcript_path": "/dev/null"})
    started = time.perf_counter()
    out = subprocess.run([str(ROOT / "hooks" / "cairn-hook"), EVENT], input=payload,
                         capture_output=True, text=True, env=env, check=True)
    return 1000 * (time.perf_counter() - started), out.stdout


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summary(times: list[float], injected: int = 0) -> dict[str, float]:
    return {"p50": statistics.median(times), "p95": percentile(times, 0.95), "max": max(times),
            "injected": injected / len(times)}


def measure(env: dict[str, str], prompts: list[str]) -> dict[str, float]:
    times, injected = [], 0
    RUN[0] = f"{os.getpid()}-{time.monotonic_ns()}"
    for prompt in prompts:
        ms, out = run_hook(env, prompt)
        times.append(ms)
        injected += bool(out.strip())
    return summary(times, injected)


def measure_baseline(count: int) -> dict[str, float]:
    """The bare interpreter, `python -c pass`, as a whole process."""
    times = []
    for _ in range(count):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(1000 * (time.perf_counter() - started))
    return summary(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--prompts", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work", type=Path, help="keep the store here, and reuse it if it is there")
    parser.add_argument("--event", choices=("UserPromptSubmit", "SessionStart", "PreToolUse"),
                        default="UserPromptSubmit")
    args = parser.parse_args()
    global EVENT
    EVENT = args.event

    work = args.work or Path(tempfile.mkdtemp(prefix="cairn-hook-bench-"))
    home, project, plugin_data = work / "home", work / "project", work / "plugin-data"
    reuse = (work / f"built-scoped-{args.memories}").exists()
    project.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (work / "empty-config.yaml").touch()  # no settings (a missing CAIRN_CONFIG file is an error)
    os.environ.update({"CAIRN_HOME": str(home), "HF_HUB_OFFLINE": "1", "CAIRN_CONFIG": str(work / "empty-config.yaml")})
    if reuse:
        print(f"reusing the store of {args.memories} memories in {work}")
    else:
        started = time.perf_counter()
        build_store(home, project, args.memories)
        (work / f"built-scoped-{args.memories}").touch()
        print(f"built a store of {args.memories} memories in {time.perf_counter() - started:.0f} s")
    # An installed plugin's engine has its bytecode after its first run; without it every hook process
    # would compile the engine's sources (PYTHONDONTWRITEBYTECODE, set on some machines, keeps Python
    # from caching it), which is not what a user waits for.
    caching = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "engine" / "cairn")], check=True,
                   stdout=subprocess.DEVNULL, env=caching)
    print("load average at start: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))

    env = {**os.environ, "CLAUDE_PROJECT_DIR": str(project), "CLAUDE_PLUGIN_DATA": str(plugin_data),
           "CLAUDE_PLUGIN_ROOT": str(ROOT), "CAIRN_RUNTIME_PYTHON": sys.executable}
    rng = random.Random(11)
    prompts = [rng.choice(PROMPTS).format(s=rng.choice(SUBJECTS), t=rng.choice(TOOLS)) for _ in range(args.prompts)]

    from cairn.adapters.warm import client as warm

    results: dict[str, list[dict[str, float]]] = {"python -c pass": [], "cold (keyword-only)": [],
                                                  "warm (hybrid)": []}
    for run in range(args.runs):
        results["python -c pass"].append(measure_baseline(args.prompts))
        results["cold (keyword-only)"].append(measure({**env, "CAIRN_NO_WARM": "1"}, prompts))
        warm.spawn(sys.executable)
        if not warm.wait_until_ready(120):
            sys.exit("the warm process did not start; see the data root's logs/service.log")
        run_hook(env, "warm up the store cache")
        results["warm (hybrid)"].append(measure(env, prompts))
        warm.request({"op": "shutdown"})
        while warm.is_running():
            time.sleep(0.1)
        print(f"run {run + 1}: " + "; ".join(f"{k} p95 {v[-1]['p95']:.0f} ms" for k, v in results.items()))

    print(f"\n{EVENT} hook, {args.memories} memories, {args.prompts} prompts, median of {args.runs} runs")
    print("load average at end: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    print(f"{'path':<22}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}{'injected':>10}{'p95 / baseline':>16}")
    base = statistics.median(r["p95"] for r in results["python -c pass"])
    for path, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in ("p50", "p95", "max", "injected")}
        injected = "" if path == "python -c pass" else f"{med['injected']:.0%}"
        print(f"{path:<22}{med['p50']:>9.0f}{med['p95']:>9.0f}{med['max']:>9.0f}{injected:>10}"
              f"{med['p95'] / base:>16.1f}")


if __name__ == "__main__":
    main()
