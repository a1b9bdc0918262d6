"""The Stop hook's latency while capture runs, and capture throughput, measured as Claude Code runs them.

    python bench/capture_latency.py [--turns 2000] [--runs 20]

Stop hook: `python -P -m cairn hook Stop` (what hooks/cairn-hook runs, PYTHONPATH=engine), the hook's
JSON on stdin, timed as a whole process from start to exit, in a throwaway CAIRN_HOME. Each path
gets its own session whose transcript starts with --turns turns; every run first appends one exchange
(a prompt and a reply, as a real turn does) and then fires Stop, so the first run hands off the
whole transcript and the later ones are timed while that capture still runs. Paths:
- warm: the warm process is up (it queues the capture and replies at once; its worker ingests);
- no warm process (CAIRN_NO_WARM=1): the hook starts a detached `cairn hook capture-now` process.
- with --compare-no-fork, warm, no fork (CAIRN_HOOK_NO_FORK=1): the hook process itself reaches
  the warm process (the handoff before the hook forked).
Beside them, `python -P -c pass` with the same interpreter: the floor any hook process pays.
After each path the script waits until every turn is stored (and counts them), so a hook that
returned early without handing off would show up as missing turns, not as a fast figure.

Throughput: `Cairn.sessions.ingest` of a fresh --turns-turn transcript in this process, with the
configured embedding model (scrub, index, embed, store) and keyword-only (embedder=None).
A script printing figures, not a test; docs/benchmarks.md has the results.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "engine"))

WORDS = ("the build fails because the migration runs before the schema cache is warmed so we retry the job "
         "with a longer timeout and pin the driver version in the lock file then rerun the tests on staging "
         "and check the logs for the connection pool warnings before we deploy the worker queue").split()
ERRORS = ["ModuleNotFoundError: No module named 'app_core'", "psycopg.OperationalError: connection refused",
          "TypeError: cannot read properties of undefined (reading 'map')", "E0425: cannot find value `cfg`"]


def turn_lines(start: int, count: int, session: str, rng: random.Random) -> str:
    """`count` transcript lines (alternating user prompts and assistant replies with a tool call) of
    about 40 words each, uuids numbered from `start`."""
    out = []
    for i in range(start, start + count):
        text = " ".join(rng.choice(WORDS) for _ in range(40))
        if i % 17 == 0:
            text += " " + rng.choice(ERRORS)
        kind = "user" if i % 2 == 0 else "assistant"
        content = text if kind == "user" else [
            {"type": "text", "text": text},
            {"type": "tool_use", "id": f"t{i}", "name": "Edit", "input": {"file_path": f"/app/src/mod{i % 40}.py"}}]
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1_780_000_000 + i)) + ".000Z"
        out.append(json.dumps({"type": kind, "uuid": f"{session}-{i}", "sessionId": session, "timestamp": stamp,
                               "gitBranch": "main", "cwd": "/app", "message": {"role": kind, "content": content}}))
    return "\n".join(out) + "\n"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summary(times: list[float]) -> str:
    return f"p50 {statistics.median(times):6.1f} ms   p95 {percentile(times, 0.95):6.1f} ms   max {max(times):6.1f} ms"


def timed(cmd: list[str], env: dict[str, str], stdin: str = "") -> float:
    started = time.perf_counter()
    subprocess.run(cmd, input=stdin, text=True, env=env, check=True, capture_output=True)
    return 1000 * (time.perf_counter() - started)


def stored_turns(project: Path, session: str) -> int:
    from cairn import Cairn, SessionNotFound, StoreNotFound

    try:
        with Cairn.open(cwd=project, embedder=None) as memory:
            return memory.sessions.read(session, limit=0)[0].turn_count
    except (SessionNotFound, StoreNotFound):
        return 0


def hook_path(label: str, env: dict[str, str], project: Path, work: Path, turns: int, runs: int) -> list[float]:
    """Time `runs` Stop hooks on a session of `turns` turns growing by one exchange per run; wait
    until every turn is stored."""
    session = f"bench-{label}"
    transcript = work / f"{session}.jsonl"
    rng = random.Random(label)
    transcript.write_text(turn_lines(0, turns, session, rng))
    payload = json.dumps({"session_id": session, "transcript_path": str(transcript), "cwd": str(project),
                          "hook_event_name": "Stop", "stop_hook_active": False})
    cmd = [sys.executable, "-P", "-m", "cairn", "hook", "Stop"]
    times = []
    total = turns
    for _ in range(runs):
        with open(transcript, "a") as out:
            out.write(turn_lines(total, 2, session, rng))
        total += 2
        times.append(timed(cmd, env, payload))
    started = time.perf_counter()
    while (have := stored_turns(project, session)) < total:
        if time.perf_counter() - started > 1800:
            sys.exit(f"{label}: only {have} of {total} turns stored after 30 min; see the data root's logs")
        time.sleep(0.5)
    print(f"  {label}: {summary(times)}; all {total} turns stored {time.perf_counter() - started:.0f} s after "
          "the last hook", flush=True)
    return times


def throughput(project: Path, work: Path, turns: int) -> dict[str, float]:
    from cairn import Cairn, embedder_from_config, load_config

    out = {}
    for label, embedder in (("with embeddings", embedder_from_config(load_config(project))), ("keyword-only", None)):
        if label == "with embeddings" and embedder is None:
            sys.exit("no embedding model: the throughput with embeddings would mislead")
        path = work / f"throughput-{label.split()[0]}.jsonl"
        path.write_text(turn_lines(0, turns, path.stem, random.Random(label)))
        with Cairn.open(cwd=project, embedder=embedder) as memory:
            if embedder is not None:
                memory.embed(["warm-up"])  # the model's load is not ingestion
            started = time.perf_counter()
            done = memory.sessions.ingest(path)
            elapsed = time.perf_counter() - started
        assert done["turns_added"] == turns, done
        out[label] = turns / elapsed
        print(f"  {label}: {turns} turns in {elapsed:.1f} s, {turns / elapsed:.0f} turns/s")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--compare-no-fork", action="store_true", help="also time the hook without its fork")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="cairn-capture-bench-"))
    home, project = work / "home", work / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (work / "empty-config.yaml").touch()  # no settings (a missing CAIRN_CONFIG file is an error)
    os.environ.update({"CAIRN_HOME": str(home), "HF_HUB_OFFLINE": "1", "CAIRN_CONFIG": str(work / "empty-config.yaml"),
                       "TOKENIZERS_PARALLELISM": "false"})
    os.environ.pop("CAIRN_STORE", None)
    env = {**os.environ, "CLAUDE_PROJECT_DIR": str(project), "PYTHONPATH": str(ROOT / "engine")}
    load = os.getloadavg()[0]

    from cairn.adapters.warm import client as warm

    baseline = [timed([sys.executable, "-P", "-c", "pass"], env) for _ in range(args.runs)]
    print(f"python -P -c pass: {summary(baseline)}", flush=True)
    print("no warm process:")
    cold = hook_path("cold", {**env, "CAIRN_NO_WARM": "1"}, project, work, args.turns, args.runs)
    print("warm process up:")
    warm.spawn(sys.executable)
    if not warm.wait_until_ready(300):
        sys.exit("the warm process did not start; see the data root's logs/service.log")
    try:
        hot = hook_path("warm", env, project, work, args.turns, args.runs)
        unforked = hook_path("warm-no-fork", {**env, "CAIRN_HOOK_NO_FORK": "1"}, project, work, args.turns,
                             args.runs) if args.compare_no_fork else None
    finally:
        warm.request({"op": "shutdown"})
    rates = {} if args.skip_throughput else throughput(project, work, args.turns)

    print(f"\nStop hook, {args.turns}-turn transcript, {args.runs} runs each (load average {load:.1f} at start)")
    print(f"  python -P -c pass           {summary(baseline)}")
    print(f"  Stop, warm process up       {summary(hot)}")
    print(f"  Stop, no warm process       {summary(cold)}")
    if unforked:
        print(f"  Stop, warm, no fork         {summary(unforked)}")
    for label, rate in rates.items():
        print(f"ingestion {label}: {rate:.0f} turns/s")


if __name__ == "__main__":
    main()
