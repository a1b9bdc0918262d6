"""Evaluate cairn.memories.supersede.classify on the labelled supersession pairs, and the engine on chains.

Embeds both sides of every pair with the default embedder (all-MiniLM-L6-v2, int8 ONNX, offline,
CPU: what the plugin runs), runs classify with the cosine and again with cosine=None (keyword-only
mode), and prints precision, recall and F1 of the "supersede" label, the confusion matrix and the
misclassified pairs for each mode. Pairs may carry `split: NAME` (default `dev`): figures are then
also printed per split, and the threshold sweep uses the dev splits only (names starting "dev").

Chains (the file's `chains:`, memories remembered in order) go through the real engine, once with the
model and once keyword-only, each on a fresh store: the steps current at the end are compared with
the labelled `current`, and every step that should have been retired but is still current must have
been reported as a possible conflict by a later step ("unreported" counts those that were not).

    python bench/supersession_eval.py [PAIRS.yaml] [--split NAME] [--threshold-sweep]

--split scores only that split (pairs and chains), read from tests/data/supersession_NAME.yaml
when no file is given and that file exists (a held-out split: `--split holdout12`). Entries
without `split:` take their file's (supersession_NAME.yaml: NAME; supersession_pairs.yaml: dev).

--threshold-sweep also prints supersede precision/recall for a range of SIMILARITY_THRESHOLD
values, which is how the constant in cairn/memories/supersede.py was chosen. A script printing figures, not
a test.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"  # before sentence_transformers is imported: never reach a hub

import numpy as np
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "engine"))  # run from a checkout without installing the package

from cairn.memories import supersede  # noqa: E402

LABELS = ("supersede", "conflict", "unrelated")
DEFAULT_PAIRS = REPO / "tests" / "data" / "supersession_pairs.yaml"


def file_split(path: Path) -> str:
    """The split of a file's entries that name none: its name's (supersession_holdout12.yaml:
    holdout12), "dev" for supersession_pairs.yaml or any other name."""
    stem = path.stem.removeprefix("supersession_")
    return "dev" if stem in ("pairs", path.stem) else stem


def load_pairs(path: Path) -> list[dict]:
    pairs = yaml.safe_load(path.read_text(encoding="utf-8")).get("pairs") or []
    for pair in pairs:
        if pair["label"] not in LABELS:
            raise SystemExit(f"bad label {pair['label']!r} in pair {pair}")
        pair.setdefault("split", file_split(path))
    return pairs


def load_chains(path: Path) -> list[dict]:
    chains = yaml.safe_load(path.read_text(encoding="utf-8")).get("chains") or []
    for chain in chains:
        chain.setdefault("split", file_split(path))
    return chains


def default_embedder():
    from cairn.embedder import make_embedder

    embedder = make_embedder()
    embedder.load()
    return embedder


def cosines(pairs: list[dict], embedder) -> np.ndarray:
    old = embedder.embed([p["old"] for p in pairs])
    new = embedder.embed([p["new"] for p in pairs])
    old = old / np.linalg.norm(old, axis=1, keepdims=True)
    new = new / np.linalg.norm(new, axis=1, keepdims=True)
    return np.einsum("ij,ij->i", old, new)


def run_chain(chain: dict, embedder, home: Path, name: str) -> dict:
    """Remember the chain's steps in order on a fresh store; which steps are current at the end."""
    from cairn import Cairn

    with Cairn.open(name, create=True, embedder=embedder) as engine:
        results = [engine.remember(text, kind=chain.get("kind", "fact"), detect=True) for text in chain["steps"]]
        current_ids = {m.id for m in engine.list(limit=1000)}
    # A step that was a duplicate wrote nothing: it is no current memory of its own.
    current = {i for i, r in enumerate(results) if r.status == "created" and r.memory.id in current_ids}
    reported = {c["id"] for r in results for c in r.conflicts}
    ids = [r.memory.id for r in results]
    expected = set(chain["current"])
    stale = [i for i in range(len(ids)) if i not in expected and i in current]
    unreported = [i for i in stale if ids[i] not in reported]
    return {"current": current, "expected": expected, "unreported": unreported, "n": len(ids)}


def report_chains(title: str, chains: list[dict], embedder) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as home:
        os.environ["CAIRN_HOME"] = home
        config = Path(home) / "config.yaml"
        config.touch()
        os.environ["CAIRN_CONFIG"] = str(config)
        runs = [run_chain(c, embedder, Path(home), f"chain-{i}") for i, c in enumerate(chains)]
    tp = fp = fn = 0
    print(f"\n=== chains: {title}")
    for chain, run in zip(chains, runs):
        gone = set(range(run["n"])) - run["current"]
        should_go = set(range(run["n"])) - run["expected"]
        tp, fp, fn = tp + len(gone & should_go), fp + len(gone - should_go), fn + len(should_go - gone)
        if run["current"] != run["expected"] or run["unreported"]:
            print(f"  [{chain['note']}] current {sorted(run['current'])}, expected {sorted(run['expected'])}"
                  f"{', unreported ' + str(run['unreported']) if run['unreported'] else ''}")
    exact = sum(r["current"] == r["expected"] for r in runs)
    unreported = sum(len(r["unreported"]) for r in runs)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    print(f"{exact}/{len(runs)} chains end with exactly the labelled memories current; retired steps: "
          f"precision {precision:.3f} recall {recall:.3f} ({tp} right, {fp} wrong, {fn} missed); "
          f"stale steps left unreported: {unreported}")


def scores(gold: list[str], predicted: list[str], label: str = "supersede") -> tuple[float, float, float]:
    tp = sum(g == label and p == label for g, p in zip(gold, predicted))
    fp = sum(g != label and p == label for g, p in zip(gold, predicted))
    fn = sum(g == label and p != label for g, p in zip(gold, predicted))
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def report(title: str, pairs: list[dict], sims: list[float | None], *, details: bool = True) -> None:
    verdicts = [supersede.classify(p["old"], p["new"], c) for p, c in zip(pairs, sims)]
    gold = [p["label"] for p in pairs]
    predicted = [v.label for v in verdicts]
    precision, recall, f1 = scores(gold, predicted)
    print(f"\n=== {title}")
    print(f"supersede  precision {precision:.3f}  recall {recall:.3f}  F1 {f1:.3f}")
    accuracy = sum(g == p for g, p in zip(gold, predicted)) / len(gold)
    print(f"3-way accuracy {accuracy:.3f} on {len(gold)} pairs")
    print("\nconfusion (rows gold, columns predicted)")
    print(f"{'':>11}" + "".join(f"{lab:>11}" for lab in LABELS))
    for g in LABELS:
        row = [sum(gl == g and pl == p for gl, pl in zip(gold, predicted)) for p in LABELS]
        print(f"{g:>11}" + "".join(f"{n:>11}" for n in row))
    if not details:
        return
    print("\nmisclassified")
    for pair, verdict, cos in zip(pairs, verdicts, sims):
        if verdict.label != pair["label"]:
            shown = "   -" if cos is None else f"{cos:.2f}"
            print(f"  [{pair['label']} -> {verdict.label}] cos {shown}  {pair['old']!r} -> {pair['new']!r}")
            print(f"      {verdict.reason}")


def sweep(pairs: list[dict], sims: np.ndarray) -> None:
    """Supersede precision/recall as SIMILARITY_THRESHOLD varies (other constants unchanged)."""
    gold = [p["label"] for p in pairs]
    saved = supersede.SIMILARITY_THRESHOLD
    print(f"\n=== threshold sweep (with model, {len(pairs)} dev pairs)")
    print(f"{'threshold':>9} {'precision':>9} {'recall':>7} {'F1':>6} {'candidates':>10}")
    try:
        for threshold in np.arange(0.30, 0.905, 0.05):
            supersede.SIMILARITY_THRESHOLD = float(round(threshold, 2))
            predicted = [supersede.classify(p["old"], p["new"], float(c)).label for p, c in zip(pairs, sims)]
            precision, recall, f1 = scores(gold, predicted)
            candidates = int((sims >= threshold).sum())
            print(f"{threshold:9.2f} {precision:9.3f} {recall:7.3f} {f1:6.3f} {candidates:10d}")
    finally:
        supersede.SIMILARITY_THRESHOLD = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", nargs="?", type=Path, help="labelled pairs YAML (default: supersession_pairs.yaml; "
                        "with --split NAME, tests/data/supersession_NAME.yaml where it exists)")
    parser.add_argument("--split", help="score only this split")
    parser.add_argument("--threshold-sweep", action="store_true", help="print P/R per SIMILARITY_THRESHOLD")
    args = parser.parse_args()
    if args.pairs is None:
        own = DEFAULT_PAIRS.parent / f"supersession_{args.split}.yaml"
        args.pairs = own if args.split and own.is_file() else DEFAULT_PAIRS
    if not args.pairs.is_file():
        raise SystemExit(f"no truth set at {args.pairs}")

    pairs = load_pairs(args.pairs)
    chains = load_chains(args.pairs)
    if args.split:
        pairs = [p for p in pairs if p.get("split", "dev") == args.split]
        chains = [c for c in chains if c.get("split", "dev") == args.split]
        if not pairs and not chains:
            raise SystemExit(f"no pair or chain of split {args.split} in {args.pairs}")
    counts = {lab: sum(p["label"] == lab for p in pairs) for lab in LABELS}
    print(f"{len(pairs)} pairs from {args.pairs}: {counts}")
    print(f"SIMILARITY_THRESHOLD {supersede.SIMILARITY_THRESHOLD}, PARAPHRASE_COSINE "
          f"{supersede.PARAPHRASE_COSINE}, CONFLICT_OVERLAP {supersede.CONFLICT_OVERLAP}")
    embedder = default_embedder()
    print(f"embedder {embedder.fingerprint}")
    sims = cosines(pairs, embedder)
    report("all pairs, with all-MiniLM-L6-v2 cosine", pairs, [float(c) for c in sims])
    report("all pairs, keyword-only (cosine=None)", pairs, [None] * len(pairs))
    splits = sorted({p.get("split", "dev") for p in pairs})
    if len(splits) > 1:
        for split in splits:
            chosen = [i for i, p in enumerate(pairs) if p.get("split", "dev") == split]
            subset = [pairs[i] for i in chosen]
            report(f"split {split} ({len(subset)} pairs), with cosine", subset,
                   [float(sims[i]) for i in chosen], details=False)
            report(f"split {split} ({len(subset)} pairs), cosine=None", subset, [None] * len(subset), details=False)
    if chains:
        report_chains(f"{len(chains)} chains, engine with the model", chains, embedder)
        report_chains(f"{len(chains)} chains, engine keyword-only", chains, None)
    if args.threshold_sweep:
        dev = [i for i, p in enumerate(pairs) if p.get("split", "dev").startswith("dev")]
        sweep([pairs[i] for i in dev], sims[dev])


if __name__ == "__main__":
    main()
