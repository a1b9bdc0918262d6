"""Concurrent writers on one Postgres store: --writers processes (default 8), each writing --per
memories through the engine (`Cairn.remember`, supersession detection on, 64-dim feature-hashing
vectors, each in its own transaction), all started together. Then every acknowledged write must be
in the store: lost writes = acknowledged - found (the bar, issue 14: 0). A batch of racing
`replace` calls on one memory checks the row lock: exactly one may win.

    python bench/pg_writers.py [--writers 8] [--per 250]

The server is a PostgreSQL 16 + pgvector from the pgserver wheel, in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "engine"))
WORK = Path(tempfile.mkdtemp(prefix="cairn-pgwriters-"))
os.environ["CAIRN_HOME"] = str(WORK / "home")
(WORK / "config.yaml").touch()
os.environ["CAIRN_CONFIG"] = str(WORK / "config.yaml")
os.environ.pop("CAIRN_STORE", None)

from cairn import Cairn, create_store  # noqa: E402

WRITER = """
import json, sys, time
from cairn import Cairn
from cairn.embedder import HashingEmbedder
worker, per = int(sys.argv[1]), int(sys.argv[2])
acked, latencies = [], []
with Cairn.open("team", embedder=HashingEmbedder()) as memory:
    for i in range(per):
        text = f"writer {worker} note {i}: shard {worker * 100000 + i} runs build {i * 7 + worker}"
        t = time.perf_counter()
        result = memory.remember(text, kind="fact")
        latencies.append(time.perf_counter() - t)
        acked.append(result.memory.id)
print(json.dumps({"acked": acked, "latencies": latencies}))
"""

RACER = """
import sys
from cairn import Cairn, NotCurrent
with Cairn.open("team", embedder=None) as memory:
    try:
        memory.replace(sys.argv[1], "The release train leaves on " + sys.argv[2])
        print("replaced")
    except NotCurrent:
        print("refused")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--per", type=int, default=250)
    parser.add_argument("--races", type=int, default=10)
    args = parser.parse_args()

    import pgserver

    server = pgserver.get_server(tempfile.mkdtemp(prefix="cairn-pgw-"), cleanup_mode="delete")
    url = server.get_uri()
    os.environ["CAIRN_POSTGRES_URL"] = url
    env = {**os.environ, "PYTHONPATH": str(REPO / "engine")}
    try:
        create_store("team", postgres=url)
        start = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(w), str(args.per)], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for w in range(args.writers)]
        acked, latencies, failed = [], [], 0
        for p in procs:
            out, err = p.communicate()
            if p.returncode != 0:
                failed += 1
                print(err[-2000:], file=sys.stderr)
                continue
            data = json.loads(out.splitlines()[-1])
            acked += data["acked"]
            latencies += data["latencies"]
        elapsed = time.perf_counter() - start
        with Cairn.open("team", embedder=None) as memory:
            found = {m.id for m in memory.list(limit=10_000, include_superseded=True)}
        lost = len(set(acked) - found)

        wins = []
        for r in range(args.races):
            with Cairn.open("team", embedder=None) as memory:
                old = memory.remember(f"The release train leaves on day {r}", kind="fact", detect=False).memory
            racers = [subprocess.Popen([sys.executable, "-c", RACER, old.id, f"day {r}.{w}"], env=env,
                                       stdout=subprocess.PIPE, text=True) for w in range(4)]
            wins.append(sum(p.communicate()[0].strip() == "replaced" for p in racers))

        latencies.sort()
        p95 = latencies[int(0.95 * (len(latencies) - 1))] * 1000 if latencies else float("nan")
        print("| writers | memories acknowledged | found | lost | failed processes | writes/s | remember p95 |")
        print("|---|---|---|---|---|---|---|")
        print(f"| {args.writers} processes x {args.per} | {len(acked)} | {len(found & set(acked))} | {lost} | "
              f"{failed} | {len(acked) / elapsed:.0f} | {p95:.0f} ms |")
        print(f"\nracing replace of one memory by 4 processes, {args.races} rounds: winners per round {wins} "
              f"({'exactly one each' if all(w == 1 for w in wins) else 'NOT exactly one'})")
        if lost or failed or any(w != 1 for w in wins):
            sys.exit(1)
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
