"""Calibrate the per-prompt gate on the development split of the relevance set, and trace a
precision / must-recall curve for each method tried (docs/benchmarks.md, "Applies when and the
store's own word frequencies").

For every prompt of the dev repositories (tests/data/relevance/*.yaml with `split: dev`) and of the
paraphrase class, it collects once what the hook's gate sees (context.relevant_hits: the recall hits
in order, their cosines with the prompt, the content stems each shares with the prompt, the store's
IDF of the prompt's stems: context.term_weights), then replays each candidate rule on them:

- shipped:   the absolute gate of context.passes alone (cosine thresholds + shared-stem counts);
- cosine:    cosine >= t alone (hybrid only);
- coverage:  IDF coverage >= c with at least `m` shared stems (both modes);
- combined:  shipped OR (coverage >= c, m shared stems, cosine >= floor): the chosen family.

Per point: precision, must-recall, silence (need-nothing prompts given nothing), median injected
characters (the hook's formatting and 1,200-character budget), and on the paraphrase class the share
of direct questions that inject their memory and of near misses that inject nothing.

    python bench/gate_sweep.py [--no-applies-when] [--json FILE]

The holdout split is never read here. A script printing figures, not a test.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "engine"))
sys.path.insert(0, str(REPO / "bench"))

import relevance_eval as rel  # noqa: E402
from cairn import context  # noqa: E402
from cairn.memories.render import context_line  # noqa: E402
from cairn.text import passage  # noqa: E402

HEADER = len("Cairn memories that may be relevant to this prompt (cite as [mem:ID]):")


@dataclass
class Cand:
    label: str | None    # the memory's id in the data file
    cosine: float | None
    cosine_max: float | None  # the other design: max(cosine to the text's vector, to the phrases' vector)
    shared: frozenset[str]
    chars: int           # its line in the injected text


@dataclass
class Prompt:
    kind: str            # "repo" | "direct" | "near"
    mode: str
    must: frozenset[str]
    nice: frozenset[str]
    target: str | None   # direct questions: the memory that must be injected
    question: bool       # asked as a question ("where do ...?", "can I ...")
    stems: frozenset[str]
    weights: context.TermWeights | None
    cands: list[Cand]


def collect(injector: rel.Injector, memories: list[dict], prompts: list[dict]) -> list[Prompt]:
    engine, ids = injector.store(memories)
    out: list[Prompt] = []
    # The other vector design, measured beside the stored one: a vector of the text alone and one of
    # the phrases alone ("Applies when: ..."), the memory's cosine being the larger of the two.
    by_label = {m["id"]: m for m in memories}
    texts = [m["text"] for m in memories]
    phrases = [passage("", m.get("applies_when") or []).strip() if injector.applies_when else ""
               for m in memories]
    text_vecs = injector.embedder.embed(texts)
    phrase_vecs = injector.embedder.embed([p or "-" for p in phrases])
    row = {m["id"]: i for i, m in enumerate(memories)}
    try:
        for p in prompts:
            for mode in rel.MODES:
                base = dict(kind=p["kind"], mode=mode, must=frozenset(p.get("must", ())),
                            nice=frozenset(p.get("nice", ())), target=p.get("target"),
                            question=is_question(p["text"]))
                if context.is_trivial(p["text"]):
                    out.append(Prompt(**base, stems=frozenset(), weights=None, cands=[]))
                    continue
                text = p["text"][: context.MAX_PROMPT_CHARS]
                vector = engine.embed([p["text"][: rel.EMBED_CHARS]], query=True)[0] if mode == "hybrid" else None
                if vector is None:
                    hits = engine.recall(text, k=rel.PROMPT_K * 3, use_vectors=False, scope="project")
                    cosines: dict[str, float] = {}
                else:
                    hits = engine.recall(text, k=max(rel.PROMPT_K * 3, context.HYBRID_DEPTH), query_vector=vector,
                                         scope="project")
                    cosines = context._cosines(engine, hits, vector)
                words = context.stems(text)

                def cos_max(label, vector=vector):
                    if vector is None or label not in by_label:
                        return None
                    i = row[label]
                    both = [float(text_vecs[i] @ vector)] + ([float(phrase_vecs[i] @ vector)] if phrases[i] else [])
                    return max(both)

                cands = [Cand(ids.get(h.memory.id), cosines.get(h.memory.id), cos_max(ids.get(h.memory.id)),
                              frozenset(words & context._stem_text(h.memory.passage)), len(context_line(h.memory)))
                         for h in hits]
                out.append(Prompt(**base, stems=frozenset(words), weights=context.term_weights(engine, text),
                                  cands=cands))
    finally:
        engine.close()
    return out


def load(injector: rel.Injector) -> list[Prompt]:
    prompts: list[Prompt] = []
    for data in rel.load_repos("dev"):
        rows = [dict(text=p["text"], kind="repo", must=[x["id"] for x in p.get("must") or []],
                     nice=[x["id"] for x in p.get("nice") or []]) for p in data["prompts"]]
        prompts += collect(injector, data["memories"], rows)
    for case in yaml.safe_load(rel.PARAPHRASE.read_text(encoding="utf-8"))["cases"]:
        rows = [dict(text=q["text"], kind="direct", target=q["memory"]) for q in case.get("direct") or []]
        rows += [dict(text=q["text"], kind="near") for q in case.get("near_miss") or []]
        prompts += collect(injector, case["memories"], rows)
    return prompts


# ------------------------------------------------------------------------------------------- rules

QUESTION_WORDS = {"what", "where", "why", "how", "who", "which", "when", "can", "could", "should", "do", "does",
                  "is", "are", "may", "whats", "what's"}


def is_question(text: str) -> bool:
    words = text.strip().casefold().split()
    return text.strip().endswith("?") or bool(words and words[0].strip(",") in QUESTION_WORDS)


def shipped(c: Cand, p: Prompt) -> bool:
    # context.passes on the stems already shared: the memory text is not needed again
    need = max(context.KEYWORD_MIN_SHARED_STEMS if c.cosine is None else context.MIN_SHARED_STEMS,
               math.ceil(len(p.stems) * context.SHARED_FRACTION))
    enough = bool(p.stems) and len(c.shared) >= min(need, len(p.stems))
    if c.cosine is None:
        return enough
    return c.cosine >= context.STRONG_COSINE or (c.cosine >= context.WEAK_COSINE and enough)


def coverage_rule(c: Cand, p: Prompt, cov: float, m: int, absent: float = 1.0) -> bool:
    if p.weights is None or not c.shared:
        return False
    return len(c.shared) >= min(m, len(p.stems)) and p.weights.coverage(c.shared, absent) >= cov


def score(prompts: list[Prompt], rule, mode: str) -> dict:
    tp = fp = must = must_hit = neg = silent = direct = direct_hit = near = near_silent = 0
    chars: list[int] = []
    for p in prompts:
        if p.mode != mode:
            continue
        chosen = [c for c in p.cands if rule(c, p)][: rel.PROMPT_K]
        used, lines = HEADER, []
        for c in chosen:
            if used + 1 + c.chars <= rel.PROMPT_CHARS:
                used += 1 + c.chars
                lines.append(c)
        got = {c.label for c in lines}
        if p.kind == "repo":
            tp += len(got & (p.must | p.nice))
            fp += len(got - p.must - p.nice)
            must += len(p.must)
            must_hit += len(got & p.must)
            chars.append(used if lines else 0)
            if not p.must and not p.nice:
                neg += 1
                silent += not lines
        elif p.kind == "direct":
            direct += 1
            direct_hit += p.target in got
        else:
            near += 1
            near_silent += not lines
    return {"precision": tp / (tp + fp) if tp + fp else 1.0, "must_recall": must_hit / must if must else 0.0,
            "silence": silent / neg if neg else 1.0, "median_chars": statistics.median(chars) if chars else 0,
            "direct": direct_hit / direct if direct else 0.0, "near_silent": near_silent / near if near else 1.0,
            "tp": tp, "fp": fp, "must_hit": must_hit, "must": must}


def sweep(prompts: list[Prompt]) -> dict[str, list[dict]]:
    curves: dict[str, list[dict]] = {}

    def add(method: str, mode: str, params: dict, rule) -> None:
        curves.setdefault(f"{method}/{mode}", []).append({**params, **score(prompts, rule, mode)})

    for mode in rel.MODES:
        add("shipped", mode, {}, shipped)
    for t in (0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6):
        add("cosine", "hybrid", {"t": t}, lambda c, p, t=t: c.cosine is not None and c.cosine >= t)
        add("cosine-max-of-two-vectors", "hybrid", {"t": t},
            lambda c, p, t=t: c.cosine_max is not None and c.cosine_max >= t)
    absents = (0.25, 0.5, 1.0)
    for mode in rel.MODES:
        for cov, m, a in itertools.product((0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6), (1, 2, 3), absents):
            add("coverage", mode, {"cov": cov, "m": m, "absent": a},
                lambda c, p, cov=cov, m=m, a=a: coverage_rule(c, p, cov, m, a))
    for cov, m, floor, a in itertools.product((0.25, 0.3, 0.35, 0.4, 0.45, 0.5), (1, 2), (0.1, 0.2, 0.25, 0.3),
                                              absents):
        add("combined", "hybrid", {"cov": cov, "m": m, "floor": floor, "absent": a},
            lambda c, p, cov=cov, m=m, floor=floor, a=a: shipped(c, p) or (
                c.cosine is not None and c.cosine >= floor and coverage_rule(c, p, cov, m, a)))
    for cov, m, a in itertools.product((0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7), (1, 2), absents):
        add("combined", "keyword", {"cov": cov, "m": m, "absent": a},
            lambda c, p, cov=cov, m=m, a=a: shipped(c, p) or coverage_rule(c, p, cov, m, a))
    for cov, m, floor, a, covq in itertools.product((0.3, 0.35, 0.4, 0.45), (2,), (0.1, 0.2, 0.25), absents,
                                                    (0.15, 0.2, 0.25, 0.3)):
        add("combined+question", "hybrid", {"cov": cov, "m": m, "floor": floor, "absent": a, "covq": covq},
            lambda c, p, cov=cov, m=m, floor=floor, a=a, covq=covq: shipped(c, p) or (
                c.cosine is not None and c.cosine >= floor and (
                    coverage_rule(c, p, cov, m, a) or (p.question and coverage_rule(c, p, covq, 1, a)))))
    for cov, m, a, covq in itertools.product((0.3, 0.35, 0.4, 0.45), (2,), absents, (0.15, 0.2, 0.25, 0.3)):
        add("combined+question", "keyword", {"cov": cov, "m": m, "absent": a, "covq": covq},
            lambda c, p, cov=cov, m=m, a=a, covq=covq: shipped(c, p) or coverage_rule(c, p, cov, m, a) or (
                p.question and coverage_rule(c, p, covq, 1, a)))
    return curves


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-applies-when", action="store_true", help="store the memories without their phrases")
    parser.add_argument("--json", help="also write the curves to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["CAIRN_HOME"] = home
        config = Path(home) / "config.yaml"
        config.write_text("{}\n", encoding="utf-8")
        os.environ["CAIRN_CONFIG"] = str(config)
        os.environ.pop("CAIRN_STORE", None)
        from cairn.embedder import make_embedder

        prompts = load(rel.Injector(make_embedder(None), applies_when=not args.no_applies_when))
    curves = sweep(prompts)
    for name, points in curves.items():
        print(f"== {name}")
        for pt in points:
            params = " ".join(f"{k}={v}" for k, v in pt.items() if k in ("t", "cov", "m", "floor", "absent", "covq"))
            print(f"  {params:<34} precision {pt['precision']:.3f} ({pt['tp']}/{pt['tp'] + pt['fp']})  "
                  f"must-recall {pt['must_recall']:.3f} ({pt['must_hit']}/{pt['must']})  silence {pt['silence']:.3f}  "
                  f"median chars {pt['median_chars']:.0f}  paraphrase direct {pt['direct']:.3f} "
                  f"near-miss silent {pt['near_silent']:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(curves, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
