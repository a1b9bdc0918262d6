"""What Claude has in context when a prompt arrives: the session brief and the prompt's injection.

For each repository file of a relevance set (tests/data/relevance*/: agent guidance split into
memories, real PR titles as prompts, must/nice labels written before tuning; see their README.md),
it builds a fresh store and runs every prompt in its own session, exactly as Claude Code calls the
hooks: SessionStart (the brief), then UserPromptSubmit (the prompt's injection), through
cairn.adapters.claude.hooks.handle with the model loaded and the write-time applies-when phrases stored.

It prints, per split and store size:
- in-session must-recall: the share of `must` labels whose memory is in the brief or the prompt's
  injection (the issue's headline metric), and each part alone;
- brief characters (median over stores) and per-prompt injected characters (median over prompts);
- per-prompt precision (must and nice count as relevant) and silence: the share of prompts that
  need nothing which got no injection.

--distractors N adds N memories from the other repositories' files (seeded): the large-store
variant, "a store that also holds other projects' memories". --order after (default) records them
after the repository's own (the harder order for a brief that favours recent memories); shuffled
interleaves them.

--baseline memory-md replaces Cairn's brief by what Claude Code's own MEMORY.md index would put in
front of the model at the same size: one line per memory in the order written (`- [Title](file.md) —
hook`, a title of the first five words, the hook the text, each line under 150 characters, as the
pinned CLI writes them), cut at the length of Cairn's brief for the same store; the per-prompt
injection is Cairn's, as before.

    python bench/context_eval.py [--split dev|heldout] [--distractors 200] [--order after|shuffled]
                                 [--baseline memory-md] [--keyword-only] [--details] [--json]

Splits: dev is tests/data/relevance/ (every file, its old holdout ones included: they were scored
and read many times); heldout is tests/data/relevance-heldout/, written blind by someone who never
saw the ranking code; score it once per frozen design. A script printing figures, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "engine"))

SPLITS = {"dev": REPO / "tests" / "data" / "relevance", "heldout": REPO / "tests" / "data" / "relevance-heldout"}


def load(folder: Path) -> list[dict]:
    out = []
    for path in sorted(folder.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if "memories" in data and "prompts" in data:
            data["_file"] = path.name
            out.append(data)
    if not out:
        raise SystemExit(f"no repository file under {folder}")
    return out


def distractor_pool(split: str, name: str) -> list[dict]:
    """Memories of other projects: every other repository file of the split, then the split's
    reworded-questions stores (tests/data/reworded/) and, for dev, the paraphrase cases' stores."""
    pool = []
    for data in load(SPLITS[split]):
        if data["repo"] != name:
            pool += [{**m, "id": f"x:{data['repo']}:{m['id']}"} for m in data["memories"]]
    extra = [REPO / "tests" / "data" / "reworded" / ("dev.yaml" if split == "dev" else "holdout.yaml")]
    if split == "dev":
        extra.append(SPLITS["dev"] / "paraphrase.yaml")
    for path in extra:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        for group in data.get("stores") or data.get("cases") or []:
            pool += [{**m, "id": f"x:{path.stem}:{group['id']}:{m['id']}"} for m in group["memories"]]
    return pool


class OpenEngine:
    """The hook runtime of a benchmark (claude.hooks.HookRuntime): its one open engine, whatever the
    store, with its embedder (bench/work_eval.py uses it too)."""

    def __init__(self, engine, embedder):
        self.engine, self.embedder = engine, embedder
        self.environ = os.environ  # what the processes a hook starts inherit

    def resolve(self, store=None, *, cwd=None, env=None):
        from cairn import resolve

        return resolve(store, cwd=cwd, env=env)

    def embedder_for(self, config):
        return self.embedder

    @contextmanager
    def memory(self, resolved, embedder):
        yield self.engine


class Session:
    """One store; each prompt runs in a fresh session through the hook handler."""

    def __init__(self, name: str, embedder):
        from cairn import Cairn

        self.name, self.embedder = name, embedder
        self.engine = Cairn.open(name, create=True, embedder=embedder)
        self.ids: dict[str, str] = {}  # memory id -> label id
        self.written: list[tuple[str, str]] = []  # (memory id, text), in the order written

    def add(self, memories: list[dict]) -> None:
        for m in memories:
            r = self.engine.remember(m["text"], kind=m["kind"], source="user", detect=False,
                                     applies_when=m.get("applies_when") or [])
            self.ids[r.memory.id] = m["id"]
            self.written.append((r.memory.id, m["text"]))

    def memory_md(self, size: int) -> str:
        """MEMORY.md as Claude Code writes it, in write order, cut at `size` characters; each line
        carries its memory's id (standing for its file name) so it can be scored."""
        out, used = [], 0
        for memory_id, text in self.written:
            title = " ".join(text.split()[:5])
            line = f"- [{title}]({memory_id}.md) — {text}"
            line = line if len(line) < 150 else line[:148] + "…"
            if used + len(line) + 1 > size:
                break
            out.append(line)
            used += len(line) + 1
        return "\n".join(out)

    def run(self, prompt: str) -> tuple[str, str]:
        """(brief, injection) of a new session whose first prompt is `prompt`."""
        from cairn.adapters.claude import hooks as claude_hooks

        env = {"CAIRN_STORE": self.name, "CAIRN_HOME": os.environ["CAIRN_HOME"],
               "CAIRN_CONFIG": os.environ["CAIRN_CONFIG"]}
        sid = str(uuid.uuid4())

        host = OpenEngine(self.engine, self.embedder)
        parts = [claude_hooks.handle(event, {"session_id": sid, "source": "startup"}, env, host)
                 for event in ("SessionStart", "SessionStart:rest")]
        brief = "\n".join(((out or {}).get("hookSpecificOutput") or {}).get("additionalContext") or ""
                          for out in parts).strip()
        out = claude_hooks.handle("UserPromptSubmit", {"session_id": sid, "prompt": prompt}, env, host)
        injected = ((out or {}).get("hookSpecificOutput") or {}).get("additionalContext") or ""
        return brief, injected

    def labels(self, text: str) -> set[str]:
        from cairn.memories.render import cited_ids

        return {self.ids[i] for i in cited_ids(text) + re.findall(r"\]\(([0-9A-Z]{26})\.md\)", text)
                if i in self.ids}


def evaluate(split: str, repos: list[dict], embedder, distractors: int, details: bool, order: str = "after",
             baseline: str | None = None) -> dict:
    must_total = must_ctx = must_brief = must_prompt = 0
    tp = fp = negatives = silent = 0
    brief_chars: list[int] = []
    prompt_chars: list[int] = []
    store_sizes: list[int] = []
    lines: list[str] = []
    for n, data in enumerate(repos):
        session = Session(f"ctx-{n}", embedder)
        own = list(data["memories"])
        if distractors:
            pool = distractor_pool(split, data["repo"])
            if len(pool) < distractors:
                raise SystemExit(f"only {len(pool)} distractors for {data['repo']}")
            own += random.Random(n).sample(pool, distractors)
            if order == "shuffled":
                random.Random(1000 + n).shuffle(own)
        session.add(own)
        store_sizes.append(len(session.ids))
        texts = {m["id"]: m["text"] for m in data["memories"]}
        try:
            first = True
            for p in data["prompts"]:
                must = {x["id"] for x in p.get("must") or []}
                nice = {x["id"] for x in p.get("nice") or []}
                brief, injected = session.run(p["text"])
                if baseline == "memory-md":
                    brief = session.memory_md(len(brief))
                if first:
                    brief_chars.append(len(brief))
                    first = False
                in_brief, in_prompt = session.labels(brief), session.labels(injected)
                prompt_chars.append(len(injected))
                must_total += len(must)
                must_ctx += len(must & (in_brief | in_prompt))
                must_brief += len(must & in_brief)
                must_prompt += len(must & in_prompt)
                tp += len(in_prompt & (must | nice))
                fp += len(in_prompt - must - nice)
                if not must and not nice:
                    negatives += 1
                    silent += not injected
                if details:
                    missed = must - in_brief - in_prompt
                    wrong = in_prompt - must - nice
                    if missed or wrong:
                        line = f"  {data['repo']} {p['id']}: {p['text']!r}"
                        if missed:
                            line += "\n      missed: " + "; ".join(f"{m} {texts[m][:70]!r}" for m in sorted(missed))
                        if wrong:
                            line += "\n      wrong:  " + "; ".join(
                                f"{m} {texts.get(m, m)[:70]!r}" for m in sorted(wrong))
                        lines.append(line)
        finally:
            session.engine.close()

    def ratio(a: int, b: int) -> float | None:
        return round(a / b, 3) if b else None

    return {
        "stores": len(repos), "store_size_median": statistics.median(store_sizes),
        "prompts": len(prompt_chars), "must": must_total,
        "in_session_must_recall": ratio(must_ctx, must_total),
        "brief_must_recall": ratio(must_brief, must_total),
        "prompt_must_recall": ratio(must_prompt, must_total),
        "prompt_precision": ratio(tp, tp + fp),
        "silence": ratio(silent, negatives), "need_nothing": negatives,
        "brief_chars_median": statistics.median(brief_chars), "brief_chars_max": max(brief_chars),
        "prompt_chars_median": statistics.median(prompt_chars),
        "prompt_chars_median_when_injecting": statistics.median([c for c in prompt_chars if c] or [0]),
        "details": lines,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=tuple(SPLITS), default="dev")
    parser.add_argument("--distractors", type=int, default=0, help="unrelated memories added to each store")
    parser.add_argument("--order", choices=("after", "shuffled"), default="after",
                        help="distractors recorded after the repository's memories, or interleaved")
    parser.add_argument("--baseline", choices=("memory-md",), help="score a MEMORY.md index of equal size instead")
    parser.add_argument("--keyword-only", action="store_true", help="no model: BM25 and the lexical gate")
    parser.add_argument("--brief-chars", type=int, help="hooks.brief_chars (default: Cairn's)")
    parser.add_argument("--details", action="store_true", help="list missed must labels and wrong injections")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    repos = load(SPLITS[args.split])
    with tempfile.TemporaryDirectory() as home:
        os.environ["CAIRN_HOME"] = home
        config = Path(home) / "config.yaml"
        config.write_text("{}\n" if args.brief_chars is None else f"hooks:\n  brief_chars: {args.brief_chars}\n",
                          encoding="utf-8")  # defaults, never the user's own config
        os.environ["CAIRN_CONFIG"] = str(config)
        os.environ.pop("CAIRN_STORE", None)
        from cairn.embedder import make_embedder

        embedder = None if args.keyword_only else make_embedder(None, backend="auto")
        result = evaluate(args.split, repos, embedder, args.distractors, args.details, args.order, args.baseline)
    details = result.pop("details")
    if args.json:
        print(json.dumps({"split": args.split, "distractors": args.distractors, **result}, indent=2))
        return
    r = result
    print(f"split {args.split}, {r['stores']} stores (median {r['store_size_median']:.0f} memories, "
          f"{args.distractors} distractors each, {args.order}), {r['prompts']} prompts, {r['must']} must labels, "
          f"{'keyword-only' if args.keyword_only else 'hybrid'}"
          + (", brief replaced by a MEMORY.md index of equal size" if args.baseline else ""))
    print(f"  in-session must-recall {r['in_session_must_recall']}  (brief {r['brief_must_recall']}, "
          f"prompt {r['prompt_must_recall']})")
    print(f"  brief chars median {r['brief_chars_median']:.0f} (max {r['brief_chars_max']}); per-prompt chars "
          f"median {r['prompt_chars_median']:.0f} ({r['prompt_chars_median_when_injecting']:.0f} when injecting)")
    print(f"  per-prompt precision {r['prompt_precision']}  silence {r['silence']} of {r['need_nothing']}")
    if details:
        print("\n".join(details))


if __name__ == "__main__":
    main()
