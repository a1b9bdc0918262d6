"""REST recall latency against the in-process engine call, measured in the same run.

Builds a store of --memories generated memories (bench/speed.py's templates) in a temporary data
root, starts `cairn serve --transport http` on it, and times --queries recalls both ways, alternating
one in-process `Cairn.recall` and one `POST /v1/recall` (a kept-alive HTTP connection, the JSON parsed):
p50 and p95 in ms, and the ratio of the p95s (the bar: REST within 1.5x).

Both sides embed queries with the same embedder: the per-user warm process (cairn.adapters.warm.client), which
the server uses too; with --keyword-only the config disables the model on both sides (BM25 only).

    HF_HUB_OFFLINE=1 python bench/http_recall.py [--memories 10000] [--queries 300] [--keyword-only]

A script printing figures, not a test.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2] * 1000, ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--keyword-only", action="store_true")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="cairn-http-bench-"))
    config = root / "config.yaml"
    config.write_text("embedding:\n  enabled: false\n" if args.keyword_only else "")
    os.environ.update(CAIRN_HOME=str(root / "home"), CAIRN_CONFIG=str(config), HF_HUB_OFFLINE="1")

    from speed import make_memories, make_queries

    from cairn import Cairn, Draft, create_store, resolve
    from cairn.adapters.warm.embedders import session_embedder

    create_store("bench")
    resolved = resolve("bench")
    embedder = session_embedder(resolved.config)
    memories = make_memories(args.memories, seed=7)
    queries = make_queries(args.queries, seed=11)
    started = time.perf_counter()
    with Cairn.open(resolved=resolved, embedder=embedder) as engine:
        for i in range(0, len(memories), 256):
            engine.remember_many([Draft(text=t, kind=k, tags=tags, source="import") for t, k, tags in
                                  memories[i:i + 256]], detect=False)
    print(f"built {args.memories} memories in {time.perf_counter() - started:.0f} s "
          f"({'keyword-only' if args.keyword_only else embedder.model_name})")

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "cairn", "serve", "--transport", "http", "--store", "bench",
                               "--port", str(port)], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("the server did not start") from None
                time.sleep(0.1)
        conn = http.client.HTTPConnection("127.0.0.1", port)

        def rest(query: str) -> int:
            conn.request("POST", "/v1/recall", json.dumps({"query": query, "k": 10}),
                         {"Content-Type": "application/json"})
            response = conn.getresponse()
            body = json.loads(response.read())
            assert response.status == 200, body
            return len(body["hits"])

        with Cairn.open(resolved=resolved, embedder=embedder) as engine:
            for q in queries[:20]:  # warm both: caches, the model, the server's first open
                engine.recall(q, k=10)
                rest(q)
            local, remote, same = [], [], 0
            for q in queries:
                t0 = time.perf_counter()
                n_local = len(engine.recall(q, k=10))
                t1 = time.perf_counter()
                n_remote = rest(q)
                t2 = time.perf_counter()
                local.append(t1 - t0)
                remote.append(t2 - t1)
                same += n_local == n_remote
        lp50, lp95 = percentiles(local)
        rp50, rp95 = percentiles(remote)
        print(f"{args.queries} queries, k=10; hit counts equal on {same}/{args.queries}")
        print("| path | p50 ms | p95 ms |")
        print("| --- | --- | --- |")
        print(f"| in-process Cairn.recall | {lp50:.1f} | {lp95:.1f} |")
        print(f"| REST POST /v1/recall | {rp50:.1f} | {rp95:.1f} |")
        print(f"p95 ratio REST / in-process: {rp95 / lp95:.2f} (bar: 1.5)")
    finally:
        server.terminate()
        server.wait(30)
        from cairn.adapters.warm import client as warm

        if warm.is_running():  # the warm process this run started (its data root is the temporary one)
            warm.request({"op": "shutdown"}, timeout=10)


if __name__ == "__main__":
    main()
