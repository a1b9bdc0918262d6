"""What Claude Code's auto memory adds to SessionStart: a project whose auto-memory folder holds 200
files (--files), already synced, against the same project with claude_memory.sync off.

    python bench/claude_memory_sync.py [--files 200] [--memories 2000] [--runs 200] [--json]

The store holds --memories Cairn memories besides the imported files; the project has a CLAUDE.md
of 60 lines and two .claude/rules files. Each run calls the SessionStart hook's handler
(adapters.claude.hooks.handle, keyword-only, as the cold hook process runs it) with a fresh session id;
the two settings alternate run by run so that load on the machine falls on both alike. Printed:
p50 and p95 milliseconds of each, and of the difference; the bar is a p95 difference of at most 50 ms.
Also the p95 of the two steps as the hook times them: "claude memory sync" (is the folder synced?
stat only) and "already loaded" (which memories CLAUDE.md, rules and MEMORY.md already hold: run
with either setting, so it is not in the difference).
Also timed once: the first sync of the folder (done by a detached process, outside the hook).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="cairn-bench-native-"))
    home = tmp / "home"
    os.environ.update({"CAIRN_HOME": str(tmp / "cairn"), "HOME": str(home)})
    config = tmp / "config.yaml"
    config.write_text("embedding:\n  enabled: false\n")
    os.environ["CAIRN_CONFIG"] = str(config)
    for var in ("CAIRN_STORE", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_DISABLE_AUTO_MEMORY"):
        os.environ.pop(var, None)
    project = tmp / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)

    from cairn import Cairn, Draft
    from cairn.adapters.claude import hooks as claude_hooks
    from cairn.adapters.claude.auto_memory import native_memory
    from cairn.adapters.claude.auto_memory_sync import sync

    (project / "CLAUDE.md").write_text("# Project\n\n" + "".join(f"- Rule {i}: keep module {i} small.\n"
                                                                  for i in range(60)))
    (project / ".claude" / "rules").mkdir(parents=True)
    for name in ("api.md", "db.md"):
        (project / ".claude" / "rules" / name).write_text(f"Rules for {name}: every change is reviewed.\n")
    native = native_memory(project)
    native.folder.mkdir(parents=True)
    index = []
    for i in range(args.files):
        name = f"memory_{i:03d}.md"
        (native.folder / name).write_text(
            f"---\nname: memory-{i}\ndescription: Native memory {i} about service {i}\nmetadata:\n  type: project\n"
            f"---\n\nService {i} listens on port {9000 + i}.\n**Why:** port plan {i}.\n")
        index.append(f"- [Memory {i}]({name}) \u2014 service {i} port")
    (native.folder / "MEMORY.md").write_text("\n".join(index[:200]) + "\n")

    with Cairn.open(cwd=project, embedder=None, create=True) as memory:
        memory.remember_many([Draft(text=f"Cairn memory {i}: the job {i} runs at {i % 24}:00 on worker {i % 7}",
                                    kind=("decision", "convention", "fact")[i % 3]) for i in range(args.memories)],
                             detect=False)
        started = time.perf_counter()
        done = sync(memory, native)
        first_sync = time.perf_counter() - started
    assert done["created"] == args.files, done

    off = tmp / "off.yaml"
    off.write_text("embedding:\n  enabled: false\nclaude_memory:\n  sync: false\n")
    env = {"CLAUDE_PROJECT_DIR": str(project), "HOME": str(home)}
    times: dict[str, list[float]] = {"sync on": [], "sync off": []}
    laps: dict[str, list[float]] = {}  # the hook's own steps, timed inside it (handle's `timings`)
    for run in range(args.runs):
        for label, cfg in (("sync on", str(config)), ("sync off", str(off))) if run % 2 else \
                (("sync off", str(off)), ("sync on", str(config))):
            os.environ["CAIRN_CONFIG"] = cfg
            payload = {"session_id": f"bench-{label.replace(' ', '-')}-{run}", "cwd": str(project), "source": "startup"}
            steps: dict[str, float] = {}
            started = time.perf_counter()
            out = claude_hooks.handle("SessionStart", payload, {**env, "CAIRN_CONFIG": cfg}, timings=steps)
            times[label].append(1000 * (time.perf_counter() - started))
            if label == "sync on":
                for step in ("claude memory sync", "already loaded"):
                    laps.setdefault(step, []).append(steps.get(step, 0.0))
            assert out and "hookSpecificOutput" in out
    diff = [a - b for a, b in zip(times["sync on"], times["sync off"])]
    result = {
        "files": args.files, "memories": args.memories, "runs": args.runs,
        "first_sync_s": round(first_sync, 2),
        **{f"{k} p50 ms": round(pct(v, 50), 1) for k, v in times.items()},
        **{f"{k} p95 ms": round(pct(v, 95), 1) for k, v in times.items()},
        "added p50 ms": round(pct(diff, 50), 1), "added p95 ms": round(pct(diff, 95), 1),
        **{f"step {k} p95 ms": round(pct(v, 95), 2) for k, v in laps.items()},
    }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:<20} {value}")


if __name__ == "__main__":
    main()
