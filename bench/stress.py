"""Concurrency stress: many Cairn processes on one store at once, then the store is checked.

Client streams run at the same time for --seconds against one project store, each a loop of real
processes spoken to as Claude Code and a user speak to them (the roles, in this order, one per stream):
- hooks: `python -P -m cairn hook UserPromptSubmit` (every 5th a SessionStart) with the hook's JSON
  on stdin and PYTHONPATH=engine, as hooks/cairn-hook runs it; a new process per event;
- mcp: one MCP server (mcp/server.py) on stdio, spoken to in JSON-RPC: memory_remember,
  memory_recall and memory_forget (of a memory it remembered) in turn;
- cli-writer: `cairn remember TEXT --json` (its id recorded once the process acknowledged it with
  exit 0), and every third call a `cairn recall QUERY --json`;
- bulk: a maintenance-like writer, one long-lived process writing batches of 50 with
  Cairn.remember_many and printing the ids of each batch once it returned.
8 streams: hooks, mcp, cli-writer, bulk, hooks, mcp, cli-writer, hooks.

Before the load, the same recall surfaces are timed on the idle store (MCP memory_recall, the
UserPromptSubmit hook, `cairn recall`); under load every stream times its own calls. Afterwards:
- every acknowledged write is there (remembered: its text readable; forgotten: a tombstone);
- nothing a user sees (CLI stdout/stderr, MCP error texts, hook stdout) holds a lock error
  ("database is locked", StoreBusy's "locked by another process"), a traceback or a raw SQLite error;
- `PRAGMA integrity_check` is ok and the FTS and vector indexes agree with the memory table
  (StoreBackend.index_report, as `cairn doctor` checks it);
- recall p95 under load against idle, per surface; beside the streams, a probe times BEGIN IMMEDIATE
  every 0.2 s (how long a writer waits for the write lock, apart from process start-up).

    python bench/stress.py [--procs 8] [--seconds 60] [--keyword-only] [--memories 300]
                           [--idle-samples 20] [--seed 1] [--json]

--keyword-only: the config turns the embedding model off and CAIRN_NO_WARM=1 keeps the warm process
away, so every hook and CLI call opens the store itself: the most SQLite contention. By default the
model is on, served by the warm process (up and loaded before anything is timed), as in the plugin.
Exit 0 when no acknowledged write is lost, no error reached a user and the store checks pass.
Figures: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "mcp" / "server.py"
ROLES = ("hooks", "mcp", "cli-writer", "bulk", "hooks", "mcp", "cli-writer", "hooks")
BATCH = 50
CALL_TIMEOUT_S = 120.0
# What must never reach a user: lock errors (raw or as StoreBusy), tracebacks, raw SQLite errors.
LEAK = re.compile(r"database is locked|database table is locked|locked by another process|Traceback \(most recent|"
                  r"OperationalError|DatabaseError|sqlite3?\.|disk I/O error|SQLITE_", re.IGNORECASE)
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu redis postgres kafka nginx "
         "deploy staging release cache queue worker schema index backup token latency budget").split()

BULK = textwrap.dedent("""
    import io, json, random, sys, time
    from ulid import ULID
    from cairn import Cairn, Draft
    rng = random.Random(int(sys.argv[1]))
    deadline = time.monotonic() + float(sys.argv[2])
    words, size = sys.argv[3].split(), int(sys.argv[4])
    with Cairn.open(create=True) as memory:
        n = 0
        while n == 0 or time.monotonic() < deadline:  # one batch at least, however slow the start
            n += 1
            texts = [f"bulk {sys.argv[1]} batch {n} item {j}: " + " ".join(rng.choices(words, k=8))
                     for j in range(size)]
            started = time.perf_counter()
            if n % 2:  # remember_many: each memory its own short transaction
                ids = [r.memory.id for r in memory.remember_many([Draft(text=t, kind="fact") for t in texts],
                                                                   detect=False)]
                what = "remember_many"
            else:  # an import: the whole batch in one transaction, embedded afterwards
                at = int(time.time() * 1000)
                ids = [str(ULID()) for _ in texts]
                lines = [json.dumps({"id": i, "text": t, "kind": "fact", "importance": 3, "source": "import",
                                     "valid_from": at, "recorded_at": at}) for i, t in zip(ids, texts)]
                counts = memory.import_(io.BytesIO("\\n".join(lines).encode()))
                assert counts["imported"] == size, counts
                what = "import"
            print(what, round(time.perf_counter() - started, 4), *ids, flush=True)
            time.sleep(0.2)
""")


@dataclass
class Stream:
    """What one client stream did: its calls, what it saw, what it was acknowledged."""

    role: str
    number: int
    calls: int = 0
    remembered: list[str] = field(default_factory=list)  # acknowledged writes (ids)
    forgotten: list[str] = field(default_factory=list)  # acknowledged forgets (ids)
    refused: list[str] = field(default_factory=list)  # a clean error a user saw (one line)
    leaks: list[str] = field(default_factory=list)  # a lock error, traceback or raw SQLite error a user saw
    latency: dict[str, list[float]] = field(default_factory=dict)  # surface -> seconds per call

    def time(self, surface: str, seconds: float) -> None:
        self.latency.setdefault(surface, []).append(seconds)

    def saw(self, text: str, *, failed: bool) -> None:
        """Record what a user would see from one call (its user-facing output)."""
        if LEAK.search(text or ""):
            self.leaks.append(text.strip()[-300:])
        elif failed:
            self.refused.append(text.strip()[-300:])


def sentence(rng: random.Random, tag: str) -> str:
    return f"{tag}: " + " ".join(rng.choices(WORDS, k=9)) + f" {rng.randrange(10**9)}"


def query(rng: random.Random) -> str:
    return " ".join(rng.choices(WORDS, k=3))


class Env:
    """The isolated data root, project and environment every process of one run shares."""

    def __init__(self, tmp: Path, keyword_only: bool):
        self.home = tmp / "home"
        self.home.mkdir(mode=0o700)
        self.project = tmp / "project"
        self.project.mkdir()
        subprocess.run(["git", "init", "-q", str(self.project)], check=True)
        config = tmp / "config.yaml"
        config.write_text("embedding:\n  enabled: false\n" if keyword_only else "")
        self.vars = {k: v for k, v in os.environ.items() if k not in ("CAIRN_STORE", "CAIRN_NO_WARM")}
        self.vars.update(CAIRN_HOME=str(self.home), CAIRN_CONFIG=str(config), CLAUDE_PROJECT_DIR=str(self.project),
                         HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false",
                         PYTHONPATH=str(ROOT / "engine"))
        if keyword_only:  # no warm process either: every hook and CLI call opens the store itself
            self.vars["CAIRN_NO_WARM"] = "1"

    def run(self, args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(args, input=stdin, capture_output=True, text=True, env=self.vars,
                              cwd=str(self.project), timeout=CALL_TIMEOUT_S)

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return self.run([sys.executable, "-m", "cairn", *args])

    def hook(self, event: str, payload: dict[str, Any]) -> subprocess.CompletedProcess:
        # As hooks/cairn-hook: -P, the engine on PYTHONPATH, the hook's JSON on stdin.
        return self.run([sys.executable, "-P", "-m", "cairn", "hook", event], stdin=json.dumps(payload))


class McpClient:
    """One MCP server on stdio, spoken to in JSON-RPC 2.0 lines (as Claude Code speaks to it)."""

    def __init__(self, env: Env, stderr_path: Path):
        import mcp.types

        self._stderr = open(stderr_path, "w")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen([sys.executable, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, text=True, encoding="utf-8", env=env.vars, cwd=str(ROOT))
        self._replies: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._id = 0
        self.request("initialize", {"protocolVersion": mcp.types.LATEST_PROTOCOL_VERSION, "capabilities": {},
                                    "clientInfo": {"name": "cairn-stress", "version": "1"}})
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                self._replies.put({"id": None, "raw": line})
                continue
            if "id" in message:
                self._replies.put(message)

    def _send(self, message: dict[str, Any]) -> None:
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._id += 1
        self._send({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        deadline = time.monotonic() + CALL_TIMEOUT_S
        while True:
            reply = self._replies.get(timeout=max(0.0, deadline - time.monotonic()))
            if reply.get("id") == self._id:
                return reply

    def tool(self, name: str, **arguments: Any) -> tuple[bool, str]:
        """(whether it failed, the text the model sees) for one tool call."""
        reply = self.request("tools/call", {"name": name, "arguments": arguments})
        if "error" in reply:
            return True, json.dumps(reply["error"])
        result = reply["result"]
        return bool(result.get("isError")), "".join(c.get("text", "") for c in result.get("content", []))

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()


def cli_remember(env: Env, stream: Stream, rng: random.Random) -> None:
    started = time.perf_counter()
    out = env.cli("remember", sentence(rng, f"cli {stream.number}"), "--json")
    stream.time("cli remember", time.perf_counter() - started)
    stream.saw(out.stdout + out.stderr, failed=out.returncode != 0)
    if out.returncode == 0:
        stream.remembered.append(json.loads(out.stdout)["memory"]["id"])


def cli_recall(env: Env, stream: Stream, rng: random.Random) -> None:
    started = time.perf_counter()
    out = env.cli("recall", query(rng), "--json")
    stream.time("cli recall", time.perf_counter() - started)
    stream.saw(out.stdout + out.stderr, failed=out.returncode != 0)


def prompt_hook(env: Env, stream: Stream, rng: random.Random, session: str) -> None:
    payload = {"session_id": session, "hook_event_name": "UserPromptSubmit", "cwd": str(env.project),
               "prompt": f"how do we handle {query(rng)} in this project?"}
    started = time.perf_counter()
    out = env.hook("UserPromptSubmit", payload)
    stream.time("UserPromptSubmit hook", time.perf_counter() - started)
    check_hook(stream, out)


def check_hook(stream: Stream, out: subprocess.CompletedProcess) -> None:
    # A hook's stdout reaches Claude Code (and the model); it must be empty or one JSON object.
    failed = out.returncode != 0
    if out.stdout.strip():
        try:
            json.loads(out.stdout)
        except ValueError:
            failed = True
    stream.saw(out.stdout, failed=failed)


def run_hooks(env: Env, stream: Stream, deadline: float, rng: random.Random) -> None:
    session = f"stress-{stream.number}-{rng.randrange(10**6)}"
    while time.monotonic() < deadline:
        stream.calls += 1
        if stream.calls % 5 == 1:
            payload = {"session_id": session, "hook_event_name": "SessionStart", "source": "startup",
                       "cwd": str(env.project)}
            started = time.perf_counter()
            out = env.hook("SessionStart", payload)
            stream.time("SessionStart hook", time.perf_counter() - started)
            check_hook(stream, out)
        else:
            prompt_hook(env, stream, rng, session)


def run_cli_writer(env: Env, stream: Stream, deadline: float, rng: random.Random) -> None:
    while time.monotonic() < deadline:
        stream.calls += 1
        (cli_recall if stream.calls % 3 == 0 else cli_remember)(env, stream, rng)


def mcp_recall(client: McpClient, stream: Stream, rng: random.Random) -> None:
    started = time.perf_counter()
    failed, text = client.tool("memory_recall", query=query(rng))
    stream.time("MCP memory_recall", time.perf_counter() - started)
    stream.saw(text, failed=failed)


def run_mcp(client: McpClient, stream: Stream, deadline: float, rng: random.Random) -> None:
    mine: list[str] = []
    while time.monotonic() < deadline:
        stream.calls += 1
        step = stream.calls % 4
        if step in (1, 2):
            started = time.perf_counter()
            failed, text = client.tool("memory_remember", text=sentence(rng, f"mcp {stream.number}"))
            stream.time("MCP memory_remember", time.perf_counter() - started)
            stream.saw(text, failed=failed)
            if not failed:
                made = json.loads(text)["id"]
                stream.remembered.append(made)
                mine.append(made)
        elif step == 3:
            mcp_recall(client, stream, rng)
        elif mine:
            victim = mine.pop(rng.randrange(len(mine)))
            started = time.perf_counter()
            failed, text = client.tool("memory_forget", id=victim)
            stream.time("MCP memory_forget", time.perf_counter() - started)
            stream.saw(text, failed=failed)
            if not failed:
                stream.forgotten.append(victim)


def run_bulk(env: Env, stream: Stream, seconds: float, rng: random.Random) -> None:
    proc = subprocess.Popen([sys.executable, "-c", BULK, str(stream.number), str(seconds), " ".join(WORDS),
                             str(BATCH)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env.vars, cwd=str(env.project))
    for line in proc.stdout:
        if line.startswith(("remember_many ", "import ")) and line.endswith("\n"):
            what, took, *ids = line.split()
            stream.calls += 1
            stream.time(f"bulk {what} of {BATCH}", float(took))
            stream.remembered += ids
    stderr = proc.stderr.read()
    proc.wait()
    stream.saw(stderr, failed=proc.returncode != 0)


def p95(values: list[float]) -> float | None:
    if not values:
        return None
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=20, method="inclusive")[18]


def seed(env: Env, count: int) -> None:
    """A store with `count` memories before the load (recall has something to rank)."""
    rng = random.Random(0)
    lines = [json.dumps({"text": sentence(rng, f"seed {i}"), "kind": "fact"}) for i in range(count)]
    out = env.run([sys.executable, "-c", textwrap.dedent("""
        import json, sys
        from cairn import Cairn, Draft
        with Cairn.open(create=True) as memory:
            memory.remember_many([Draft(**json.loads(l)) for l in sys.stdin], detect=False)
    """)], stdin="\n".join(lines))
    if out.returncode != 0:
        raise RuntimeError(f"seeding the store failed: {out.stderr[-2000:]}")


def idle_latency(env: Env, client: McpClient, samples: int, rng: random.Random) -> Stream:
    """The recall surfaces (and a CLI write) timed one call at a time on the otherwise idle store."""
    idle = Stream("idle", 0)
    for _ in range(samples):
        mcp_recall(client, idle, rng)
    for _ in range(samples):
        prompt_hook(env, idle, rng, "stress-idle")
    for _ in range(max(3, samples // 2)):
        cli_recall(env, idle, rng)
        cli_remember(env, idle, rng)
    if idle.leaks or idle.refused:
        raise RuntimeError(f"Cairn fails on the idle store: {(idle.leaks + idle.refused)[:3]}")
    return idle


def check_store(env: Env, streams: list[Stream]) -> dict[str, Any]:
    """Acknowledged writes present, integrity, index consistency; the hooks' failures from their log."""
    os.environ.update(CAIRN_HOME=env.vars["CAIRN_HOME"], CAIRN_CONFIG=env.vars["CAIRN_CONFIG"])
    sys.path.insert(0, str(ROOT / "engine"))
    from cairn import Cairn, MemoryNotFound

    forgotten = {i for s in streams for i in s.forgotten}
    remembered = [i for s in streams for i in s.remembered]
    lost: list[str] = []
    with Cairn.open(cwd=env.project, embedder=None) as memory:
        for memory_id in remembered:
            try:
                kept = memory.get(memory_id)
            except MemoryNotFound:
                lost.append(f"{memory_id}: missing")
                continue
            if memory_id in forgotten:
                if kept.forgotten_at is None:
                    lost.append(f"{memory_id}: forget acknowledged, still there")
            elif kept.text is None:
                lost.append(f"{memory_id}: text gone")
        store = memory.store  # the checks `cairn doctor` runs
        integrity = store.integrity()
        report = store.index_report()
    hooks_log = env.home / "logs" / "hooks.log"
    failed_open = hooks_log.read_text().count("hook failed open") if hooks_log.exists() else 0
    return {"acknowledged_writes": len(remembered), "acknowledged_forgets": len(forgotten), "lost": lost,
            "integrity": integrity, "index_report": report, "hooks_failed_open": failed_open}


def store_path(env: Env) -> str:
    os.environ.update(CAIRN_HOME=env.vars["CAIRN_HOME"], CAIRN_CONFIG=env.vars["CAIRN_CONFIG"])
    sys.path.insert(0, str(ROOT / "engine"))
    from cairn import Cairn

    with Cairn.open(cwd=env.project, embedder=None) as memory:
        return memory.status().path


def probe_write_lock(path: str, stream: Stream, stop: threading.Event, interval: float) -> None:
    """How long a writer waits for the store's write lock: BEGIN IMMEDIATE + COMMIT of nothing, timed,
    every `interval` s until `stop` (once if it is set): the SQLite contention itself, apart from
    process start-up and imports."""
    from cairn import CairnError
    from cairn.storage.db import connect

    conn = connect(path)
    try:
        while True:
            started = time.perf_counter()
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("COMMIT")
            except CairnError as exc:
                stream.saw(str(exc), failed=True)
            stream.time("write lock (BEGIN IMMEDIATE)", time.perf_counter() - started)
            if stop.wait(interval):
                break
    finally:
        conn.close()


def stop_warm(env: Env) -> None:
    env.run([sys.executable, "-c", "from cairn.adapters.warm import client as warm\n"
             "if warm.is_running():\n    warm.wait_until_ready(60)\n    warm.request({'op': 'shutdown'})\n"])


def run(procs: int, seconds: float, keyword_only: bool, seed_count: int = 300, idle_samples: int = 20,
        rng_seed: int = 1) -> dict[str, Any]:
    """One stress run; the figures as a dict (see main for their meaning)."""
    rng = random.Random(rng_seed)
    roles = [ROLES[i % len(ROLES)] for i in range(procs)]
    with tempfile.TemporaryDirectory(prefix="cairn-stress-") as tmp:
        env = Env(Path(tmp), keyword_only)
        try:
            seed(env, seed_count)
            if not keyword_only:  # the warm process up and its model loaded, as in a session under way
                cli_recall(env, Stream("warmup", 0), rng)
                env.run([sys.executable, "-c",
                         "from cairn.adapters.warm import client as warm; warm.wait_until_ready(120)"])
            streams = [Stream(role, i + 1) for i, role in enumerate(roles)]
            clients = {s.number: McpClient(env, Path(tmp) / f"mcp-{s.number}.log") for s in streams if s.role == "mcp"}
            first = next(iter(clients.values()), None) or McpClient(env, Path(tmp) / "mcp-idle.log")
            path = store_path(env)
            idle_stream = idle_latency(env, first, idle_samples, rng)
            stopped = threading.Event()
            stopped.set()
            for _ in range(idle_samples):  # one at a time: stop is set, so each call times one lock
                probe_write_lock(path, idle_stream, stopped, 0)
            idle = idle_stream.latency
            probe = Stream("lock-probe", 0)
            stop_probe = threading.Event()
            if first not in clients.values():
                first.close()
            load_avg_before = os.getloadavg()[0]
            started = time.monotonic()
            deadline = started + seconds
            threads = []
            for s in streams:
                r = random.Random(rng.random())
                if s.role == "hooks":
                    target, args = run_hooks, (env, s, deadline, r)
                elif s.role == "mcp":
                    target, args = run_mcp, (clients[s.number], s, deadline, r)
                elif s.role == "cli-writer":
                    target, args = run_cli_writer, (env, s, deadline, r)
                else:
                    target, args = run_bulk, (env, s, seconds, r)
                threads.append(threading.Thread(target=target, args=args, name=f"{s.role}-{s.number}"))
            prober = threading.Thread(target=probe_write_lock, args=(path, probe, stop_probe, 0.2))
            prober.start()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            stop_probe.set()
            prober.join()
            wall = time.monotonic() - started
            load_avg_after = os.getloadavg()[0]
            for client in clients.values():
                client.close()
            store = check_store(env, [idle_stream, *streams])
        finally:
            stop_warm(env)
    load: dict[str, list[float]] = {}
    for s in [*streams, probe]:
        for surface, values in s.latency.items():
            load.setdefault(surface, []).extend(values)
    latency = {}
    for surface in sorted(set(load) | set(idle)):
        idle_p95, load_p95 = p95(idle.get(surface, [])), p95(load.get(surface, []))
        # No ratio to an idle p95 under a millisecond (an uncontended lock): it would measure noise.
        latency[surface] = {"idle_calls": len(idle.get(surface, [])), "idle_p95_ms": _ms(idle_p95),
                            "load_calls": len(load.get(surface, [])), "load_p95_ms": _ms(load_p95),
                            "load_max_ms": _ms(max(load[surface])) if load.get(surface) else None,
                            "ratio": round(load_p95 / idle_p95, 2) if idle_p95 and idle_p95 >= 0.001 and load_p95
                            else None}
    leaks = [f"{s.role}-{s.number}: {text}" for s in [*streams, probe] for text in s.leaks]
    refused = [f"{s.role}-{s.number}: {text}" for s in [*streams, probe] for text in s.refused]
    bad_index = {k: v for k, v in store["index_report"].items() if k != "live" and v}
    return {
        "processes": procs, "roles": roles, "seconds": round(wall, 1), "keyword_only": keyword_only,
        "cpus": os.cpu_count(), "load_average_1min": [round(load_avg_before, 2), round(load_avg_after, 2)],
        "calls": {f"{s.role}-{s.number}": s.calls for s in streams},
        "acknowledged_writes": store["acknowledged_writes"], "acknowledged_forgets": store["acknowledged_forgets"],
        "lost_writes": len(store["lost"]), "lost_examples": store["lost"][:5],
        "errors_shown": len(leaks), "errors_shown_examples": leaks[:5],
        "refusals_shown": len(refused), "refusals_shown_examples": refused[:5],
        "hooks_failed_open": store["hooks_failed_open"],
        "integrity": store["integrity"], "index_problems": bad_index, "live_memories": store["index_report"]["live"],
        "latency": latency,
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(1000 * seconds, 1)


def passed(result: dict[str, Any]) -> bool:
    return (result["lost_writes"] == 0 and result["errors_shown"] == 0 and result["refusals_shown"] == 0
            and result["integrity"] == "ok" and not result["index_problems"])


def table(result: dict[str, Any]) -> str:
    lines = [f"{result['processes']} processes x {result['seconds']} s ({', '.join(result['roles'])}); "
             f"{'keyword-only' if result['keyword_only'] else 'model via the warm process'}; "
             f"{result['cpus']} CPUs, load average {result['load_average_1min'][0]} before, "
             f"{result['load_average_1min'][1]} after",
             "",
             "| figure | value |", "|---|---|",
             f"| acknowledged writes (ids) | {result['acknowledged_writes']} |",
             f"| acknowledged forgets | {result['acknowledged_forgets']} |",
             f"| lost acknowledged writes | {result['lost_writes']} |",
             f"| lock errors, tracebacks or raw SQLite errors shown | {result['errors_shown']} |",
             f"| other errors shown | {result['refusals_shown']} |",
             f"| hooks failed open (hooks.log) | {result['hooks_failed_open']} |",
             f"| integrity_check | {result['integrity']} |",
             f"| index problems | {result['index_problems'] or 'none'} |",
             f"| live memories at the end | {result['live_memories']} |",
             "",
             "| surface | idle calls | idle p95 (ms) | calls under load | p95 under load (ms) | max under load (ms) "
             "| p95 ratio |", "|---|---|---|---|---|---|---|"]

    def cell(value: Any) -> str:
        return "-" if value is None else str(value)

    for surface, f in result["latency"].items():
        lines.append(f"| {surface} | {f['idle_calls']} | {cell(f['idle_p95_ms'])} | {f['load_calls']} | "
                     f"{cell(f['load_p95_ms'])} | {cell(f['load_max_ms'])} | {cell(f['ratio'])} |")
    for key in ("lost_examples", "errors_shown_examples", "refusals_shown_examples"):
        for example in result[key]:
            lines.append(f"{key.split('_')[0]}: {example}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procs", type=int, default=8, help="concurrent client streams (default 8)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the load runs (default 60)")
    parser.add_argument("--keyword-only", action="store_true", help="the embedding model off (see above)")
    parser.add_argument("--memories", type=int, default=300, help="memories in the store before the load")
    parser.add_argument("--idle-samples", type=int, default=20, help="idle calls timed per recall surface")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.procs, args.seconds, args.keyword_only, seed_count=args.memories,
                 idle_samples=args.idle_samples, rng_seed=args.seed)
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0 if passed(result) else 1


if __name__ == "__main__":
    sys.exit(main())
