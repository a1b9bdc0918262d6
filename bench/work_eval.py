"""Memory that follows the work: is a scoped rule in Claude's context by the time Claude edits the files it governs?

For each repository file of a work set (tests/data/work/<split>/: guidance statements with the
maintainers' own path scopes, and real commits as tasks; see its README.md), it builds a fresh
project store and drives the hook handler exactly as Claude Code calls it:

1. Writing: each statement is remembered in a session of its own that first read 1-3 files of its
   scope (PreToolUse + PostToolUse Read, seeded), as Claude would when it learns a rule while
   working: `--setting learned` (the default) gives no scope, so Cairn has only what that session
   touched; `--setting given` passes the maintainers' scope as `paths` (an import of the guidance).
   A statement scoped to the whole repository is written after reading 1-3 files anywhere.
2. Tasks: each commit in a new session: SessionStart (the brief), UserPromptSubmit (the commit's
   subject), then PreToolUse and PostToolUse for Read and then Edit of every file the commit changed.

A statement is must-know for a task when one of its scope globs matches a changed file. It prints,
per store and overall: must-know in context by the time the files are edited (brief, prompt, tool
time), characters spent per task at each stage beside what a path-scoped rules loader would load
(every scoped statement covering a touched file, whole, as Claude Code loads a folder's CLAUDE.md),
tool-time precision (injected memories that are must-know for the task), and silence: the share of
tasks that touch no scoped file with nothing injected at tool time.

--distractors N adds N statements of the other repositories of the split (written the same way,
with their own files) to each store, after the project's own (--order after) or interleaved.

    python bench/work_eval.py [--split dev|heldout] [--setting learned|given] [--distractors 200]
                              [--order after|shuffled] [--brief-chars N] [--keyword-only] [--details] [--json]

Score the held-out split (written blind, tests/data/work/heldout) once per frozen design. A script
printing figures, not a test.
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
import uuid
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "engine"))

from context_eval import OpenEngine  # noqa: E402  (bench/ is this script's folder on the path)

SPLITS = {"dev": REPO / "tests" / "data" / "work" / "dev", "heldout": REPO / "tests" / "data" / "work" / "heldout"}


def load(folder: Path) -> list[dict]:
    out = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]
    if not out:
        raise SystemExit(f"no repository file under {folder}")
    return out


def covers(scope: list[str], path: str) -> bool:
    """The maintainers' scope semantics (gitignore/minimatch globstar, braces) on one path."""
    from wcmatch import glob

    flags = glob.GLOBSTAR | glob.BRACE | glob.DOTGLOB
    return any(glob.globmatch(path, s.rstrip("/") + ("/**" if s.endswith("/") else ""), flags=flags) for s in scope)


class Project:
    """One repository's store in a project folder of its own (a git repository, so Cairn picks its
    store by the git toplevel as in real use)."""

    def __init__(self, root: Path, embedder, hooks: dict[str, int], setting: str):
        from cairn import Cairn, resolve

        self.root, self.embedder, self.setting = root, embedder, setting
        root.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        if hooks:
            (root / ".cairn.yaml").write_text("hooks:\n" + "".join(f"  {k}: {v}\n" for k, v in hooks.items()),
                                              encoding="utf-8")
        self.env = {"CLAUDE_PROJECT_DIR": str(root), "CAIRN_HOME": os.environ["CAIRN_HOME"]}
        self.resolved = resolve(None, cwd=root, env=self.env)
        self.engine = Cairn.open(resolved=self.resolved, embedder=embedder, create=True)
        self.labels: dict[str, str] = {}  # memory id -> statement id

    def hook(self, event: str, payload: dict) -> str:
        from cairn.adapters.claude import hooks as claude_hooks

        host = OpenEngine(self.engine, self.embedder)
        out = claude_hooks.handle(event, {"cwd": str(self.root), **payload}, self.env, host)
        return ((out or {}).get("hookSpecificOutput") or {}).get("additionalContext") or ""

    def touch(self, sid: str, tool: str, path: str) -> str:
        """Pre- and PostToolUse of one file tool call; the text injected (PreToolUse)."""
        call = {"session_id": sid, "tool_name": tool, "tool_input": {"file_path": str(self.root / path)},
                "tool_use_id": uuid.uuid4().hex}
        text = self.hook("PreToolUse", call)
        self.hook("PostToolUse", {**call, "tool_response": {}})
        return text

    def write(self, statement: dict, files: list[str]) -> None:
        sid = "w-" + uuid.uuid4().hex
        for f in files:
            self.touch(sid, "Read", f)
        paths = statement["scope"] if self.setting == "given" else []
        r = self.engine.remember(statement["text"], kind=statement.get("kind") or "convention", source="agent",
                                 session_id=sid, detect=False, paths=paths)
        self.labels[r.memory.id] = statement["id"]

    def ids(self, text: str) -> set[str]:
        from cairn.memories.render import cited_ids

        return {self.labels[i] for i in cited_ids(text) if i in self.labels}

    def task(self, task: dict) -> dict:
        sid = "t-" + uuid.uuid4().hex
        start = {"session_id": sid, "source": "startup"}
        brief = "\n".join(t for t in (self.hook("SessionStart", start), self.hook("SessionStart:rest", start)) if t)
        prompt = self.hook("UserPromptSubmit", {"session_id": sid, "prompt": task["prompt"]})
        tool_texts = []
        for f in task["files"]:
            tool_texts.append(self.touch(sid, "Read", f))
        for f in task["files"]:
            tool_texts.append(self.touch(sid, "Edit", f))
        tools = "\n".join(t for t in tool_texts if t)
        return {"brief": brief, "prompt": prompt, "tools": tools}


def learned_files(statement: dict, everything: list[str], rng: random.Random) -> list[str]:
    pool = statement.get("scope_files") or []
    if not statement["scope"] or not pool:
        pool = everything
    return rng.sample(pool, min(len(pool), rng.randint(1, 3))) if pool else []


def evaluate(split: str, repos: list[dict], embedder, *, setting: str, distractors: int, order: str,
             hooks: dict[str, int], details: bool) -> dict:
    from cairn.memories.render import cited_ids

    rows = []
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as projects:
        for n, data in enumerate(repos):
            rng = random.Random(n)
            everything = sorted({f for s in data["statements"] for f in s.get("scope_files") or []}
                                | {f for t in data["tasks"] for f in t["files"]})
            own = [(s, data) for s in data["statements"]]
            if distractors:
                others = [(s, d) for d in repos if d is not data for s in d["statements"]]
                if len(others) < distractors:
                    raise SystemExit(f"only {len(others)} other statements for {data['repo']}")
                own = own + random.Random(1000 + n).sample(others, distractors)
                if order == "shuffled":
                    random.Random(2000 + n).shuffle(own)
            project = Project(Path(projects) / f"p{n}", embedder, hooks, setting)
            try:
                for s, d in own:
                    pool = everything if d is data else sorted({f for x in d["statements"]
                                                                for f in x.get("scope_files") or []})
                    project.write(s if d is data else {**s, "id": "x:" + s["id"]}, learned_files(s, pool, rng))
                scoped = [s for s in data["statements"] if s["scope"]]
                texts = {s["id"]: s["text"] for s in data["statements"]}
                for t in data["tasks"]:
                    must = {s["id"] for s in scoped if any(covers(s["scope"], f) for f in t["files"])}
                    loader = sum(len(s["text"]) + 1 for s in scoped
                                 if any(covers(s["scope"], f) for f in t["files"]))
                    got = project.task(t)
                    seen = {k: project.ids(v) for k, v in got.items()}
                    tool_ids = seen["tools"]
                    rows.append({
                        "repo": data["repo"], "store": len(project.labels), "must": len(must),
                        "brief": len(must & seen["brief"]),
                        "prompt": len(must & (seen["prompt"] - seen["brief"])),
                        "tools": len(must & (tool_ids - seen["brief"] - seen["prompt"])),
                        "ctx": len(must & (seen["brief"] | seen["prompt"] | tool_ids)),
                        "tool_injected": len(set(cited_ids(got["tools"]))),
                        "tool_relevant": len(tool_ids & must),
                        "chars_brief": len(got["brief"]), "chars_prompt": len(got["prompt"]),
                        "chars_tools": len(got["tools"]), "chars_loader": loader,
                        "scoped_task": bool(must), "tool_silent": not got["tools"],
                    })
                    if details:
                        missed = must - seen["brief"] - seen["prompt"] - tool_ids
                        wrong = tool_ids - must
                        if missed or wrong:
                            line = f"  {data['repo']} {t['id'][:8]} {t['prompt'][:60]!r} files={t['files'][:3]}"
                            if missed:
                                line += "\n      missed: " + "; ".join(f"{m} {texts[m][:60]!r}" for m in sorted(missed))
                            if wrong:
                                line += "\n      wrong:  " + "; ".join(f"{m} {texts.get(m, m)[:60]!r}"
                                                                    for m in sorted(wrong))
                            lines.append(line)
            finally:
                project.engine.close()
    return summarise(rows, lines)


def summarise(rows: list[dict], lines: list[str]) -> dict:
    def ratio(a: float, b: float) -> float | None:
        return round(a / b, 3) if b else None

    def part(rs: list[dict]) -> dict:
        must = sum(r["must"] for r in rs)
        scoped = [r for r in rs if r["scoped_task"]]
        unscoped = [r for r in rs if not r["scoped_task"]]
        injected = sum(r["tool_injected"] for r in rs)
        return {
            "tasks": len(rs), "store": rs[0]["store"] if rs else 0, "must": must,
            "in_context": ratio(sum(r["ctx"] for r in rs), must),
            "brief": ratio(sum(r["brief"] for r in rs), must), "prompt": ratio(sum(r["prompt"] for r in rs), must),
            "tools": ratio(sum(r["tools"] for r in rs), must),
            "tool_precision": ratio(sum(r["tool_relevant"] for r in rs), injected),
            "silence": ratio(sum(r["tool_silent"] for r in unscoped), len(unscoped)), "unscoped_tasks": len(unscoped),
            "chars_tools_mean": round(statistics.mean([r["chars_tools"] for r in rs]), 1) if rs else 0,
            "chars_loader_mean": round(statistics.mean([r["chars_loader"] for r in rs]), 1) if rs else 0,
            "chars_tools_mean_scoped": round(statistics.mean([r["chars_tools"] for r in scoped]), 1) if scoped else 0,
            "chars_loader_mean_scoped": round(statistics.mean([r["chars_loader"] for r in scoped]), 1) if scoped else 0,
            "chars_brief_median": statistics.median([r["chars_brief"] for r in rs]) if rs else 0,
            "chars_prompt_mean": round(statistics.mean([r["chars_prompt"] for r in rs]), 1) if rs else 0,
        }

    by_repo = {repo: part([r for r in rows if r["repo"] == repo]) for repo in dict.fromkeys(r["repo"] for r in rows)}
    return {"overall": part(rows), "by_repo": by_repo, "details": lines}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=tuple(SPLITS), default="dev")
    parser.add_argument("--setting", choices=("learned", "given"), default="learned")
    parser.add_argument("--distractors", type=int, default=0)
    parser.add_argument("--order", choices=("after", "shuffled"), default="after")
    parser.add_argument("--hooks", action="append", default=[], metavar="KEY=N",
                        help="a hooks setting for every store, e.g. brief_chars=16000 or tool_k=4 (default: Cairn's)")
    parser.add_argument("--repos", type=int, help="only the first N repositories (a quick run)")
    parser.add_argument("--folder", type=Path, help="a work set folder other than the split's")
    parser.add_argument("--keyword-only", action="store_true")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a module constant for a sweep, e.g. context.TOOL_MIN_SCORE=0.4 or "
                             "scopes.ANCESTOR_DECAY=0.7 (tuning on dev only)")
    parser.add_argument("--details", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    repos = load(args.folder or SPLITS[args.split])[: args.repos]
    import importlib

    hooks = {k: int(v) for k, v in (item.split("=", 1) for item in args.hooks)}

    for item in args.set:
        name, value = item.split("=", 1)
        module, attr = name.rsplit(".", 1)
        setattr(importlib.import_module(f"cairn.{module}"), attr, type(getattr(
            importlib.import_module(f"cairn.{module}"), attr))(value))
    with tempfile.TemporaryDirectory() as home:
        os.environ["CAIRN_HOME"] = home
        config = Path(home) / "config.yaml"
        config.write_text("{}\n", encoding="utf-8")  # defaults, never the user's own config
        os.environ["CAIRN_CONFIG"] = str(config)
        os.environ.pop("CAIRN_STORE", None)
        from cairn.embedder import make_embedder

        embedder = None if args.keyword_only else make_embedder(None, backend="auto")
        result = evaluate(args.split, repos, embedder, setting=args.setting, distractors=args.distractors,
                          order=args.order, hooks=hooks, details=args.details)
    details = result.pop("details")
    if args.json:
        print(json.dumps({"split": args.split, "setting": args.setting, "distractors": args.distractors,
                          "order": args.order, **result}, indent=2))
        return
    o = result["overall"]
    print(f"split {args.split}, setting {args.setting}, {len(repos)} stores, {args.distractors} distractors "
          f"({args.order}), {o['tasks']} tasks, {o['must']} must-know pairs"
          + "".join(f", {k} {v}" for k, v in hooks.items()) + "".join(f", {x}" for x in args.set))
    fmt = ("  {name:<34} store {store:>4}  in context {in_context}  (brief {brief}, prompt {prompt}, tools {tools})"
           "  tool precision {tool_precision}  silence {silence}/{unscoped_tasks}  chars/task tools "
           "{chars_tools_mean} vs loader {chars_loader_mean}  brief {chars_brief_median}")
    for name, r in result["by_repo"].items():
        print(fmt.format(name=name, **r))
    print(fmt.format(name="overall", **o))
    if details:
        print("\n".join(details))


if __name__ == "__main__":
    main()
