"""Crash safety: writers killed with SIGKILL at random points, then the store is checked.

Each trial starts a writer process (the engine, as the CLI and MCP server use it, with a fast
deterministic embedder so that every memory gets a vector) on one shared store. It remembers,
replaces, forgets and imports batches in a loop, printing one line per write once the engine call
has returned (the write is acknowledged). After a random 0.05-1.0 s the writer is killed with
SIGKILL, wherever it is: mid-transaction, mid-checkpoint after a forget, mid-batch. Then:
- `PRAGMA integrity_check` must say ok;
- every acknowledged write must be there: a remembered memory exists, a replaced one is superseded
  by its acknowledged successor, a forgotten one is a tombstone;
- the FTS and vector indexes must agree with the memory table (StoreBackend.index_report, as `cairn
  doctor` checks it): no live memory missing from either (a vector may be queued), nothing else indexed.

    python bench/crash.py [--trials 100] [--seed 1] [--json]

Exit 0 when every trial passes. Figures: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STORE = "crash"

WRITER = textwrap.dedent("""
    import random, sys
    from cairn import Cairn, Draft
    from cairn.embedder import HashingEmbedder
    trial = int(sys.argv[1])
    rng = random.Random(trial)
    with Cairn.open("crash", create=True, embedder=HashingEmbedder()) as memory:
        live = [m.id for m in memory.list(limit=200)]
        print("ready", flush=True)
        i = 0
        while True:
            i += 1
            op = rng.random()
            text = f"trial {trial} write {i}: service {rng.randrange(10**6)} listens on port {rng.randrange(65536)}"
            if op < 0.5 or len(live) < 3:
                made = memory.remember(text, kind="fact", tags=[f"t{i % 5}"], detect=False).memory.id
                live.append(made)
                print("R", made, flush=True)
            elif op < 0.7:
                old = live.pop(rng.randrange(len(live)))
                made = memory.replace(old, text).memory.id
                live.append(made)
                print("P", old, made, flush=True)
            elif op < 0.85:
                old = live.pop(rng.randrange(len(live)))
                memory.forget(old)
                print("F", old, flush=True)
            else:
                drafts = [Draft(text=f"{text} batch {j}", kind="fact") for j in range(25)]
                for result in memory.remember_many(drafts, detect=False):
                    live.append(result.memory.id)
                    print("R", result.memory.id, flush=True)
""")


def run_trial(home: Path, trial: int, rng: random.Random) -> dict:
    env = {**os.environ, "CAIRN_HOME": str(home), "PYTHONPATH": str(ROOT / "engine")}
    env.pop("CAIRN_STORE", None)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(trial)], stdout=subprocess.PIPE, text=True,
                              env=env, cwd=str(home))
    acks: list[list[str]] = []
    ready = threading.Event()

    def read() -> None:
        for line in writer.stdout:
            if not line.endswith("\n"):
                break  # a line cut by the kill was never acknowledged
            if line == "ready\n":
                ready.set()
            else:
                acks.append(line.split())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not ready.wait(120):
        writer.kill()
        raise RuntimeError("the writer did not start")
    time.sleep(rng.uniform(0.05, 1.0))
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    reader.join(30)
    return {"acks": acks, "killed": writer.returncode == -signal.SIGKILL}


def check(home: Path, acks: list[list[str]]) -> tuple[list[str], int]:
    """Problems found in the store after a kill (empty: the trial passed), and its live memories."""
    os.environ["CAIRN_HOME"] = str(home)
    from cairn import Cairn, MemoryNotFound
    from cairn.embedder import HashingEmbedder

    problems = []
    with Cairn.open(STORE, embedder=HashingEmbedder()) as memory:
        store = memory.store
        integrity = store.integrity()
        if integrity != "ok":
            problems.append(f"integrity_check: {integrity[:200]}")
        forgotten_acked = {a[1] for a in acks if a[0] == "F"}
        unacked_forgets = []
        try:
            for ack in acks:
                if ack[0] == "R" and memory.get(ack[1]).text is None and ack[1] not in forgotten_acked:
                    # Only the last write can have happened unacknowledged: a forget, killed before it printed.
                    if memory.get(ack[1]).forgotten_at is None:
                        problems.append(f"remembered {ack[1]} lost its text")
                    unacked_forgets.append(ack[1])
                elif ack[0] == "P":
                    old, new = memory.get(ack[1]), memory.get(ack[2])
                    if old.superseded_by != new.id:
                        problems.append(f"replace {ack[1]} -> {ack[2]} not recorded")
                elif ack[0] == "F" and memory.get(ack[1]).forgotten_at is None:
                    problems.append(f"forget {ack[1]} not recorded")
        except MemoryNotFound as exc:
            problems.append(f"acknowledged write missing: {exc}")
        if len(unacked_forgets) > 1:
            problems.append(f"forgotten without an acknowledged forget: {unacked_forgets}")
        report = store.index_report()
        bad = {k: v for k, v in report.items() if k != "live" and v}
        if bad:
            problems.append(f"indexes disagree with the table: {bad}")
        live = report["live"]
    return problems, live


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "engine"))
    rng = random.Random(args.seed)
    started = time.monotonic()
    passed, acked, failures, killed, live = 0, 0, [], 0, 0
    with tempfile.TemporaryDirectory(prefix="cairn-crash-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir(mode=0o700)
        for trial in range(1, args.trials + 1):
            outcome = run_trial(home, trial, rng)
            problems, live = check(home, outcome["acks"])
            acked += len(outcome["acks"])
            killed += outcome["killed"]
            if problems:
                failures.append({"trial": trial, "problems": problems[:5]})
            else:
                passed += 1
            if not args.json:
                print(f"trial {trial:3d}: {len(outcome['acks']):4d} acknowledged writes, "
                      f"{'ok' if not problems else 'FAILED: ' + '; '.join(problems[:3])}", flush=True)
    result = {"trials": args.trials, "passed": passed, "killed_with_sigkill": killed,
              "acknowledged_writes_checked": acked, "live_memories_at_end": live,
              "seconds": round(time.monotonic() - started, 1), "failures": failures}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{passed}/{args.trials} trials passed integrity, durability and index consistency; "
              f"{acked} acknowledged writes checked; {killed} writers killed with SIGKILL; "
              f"{result['seconds']} s")
    return 0 if passed == args.trials else 1


if __name__ == "__main__":
    sys.exit(main())
