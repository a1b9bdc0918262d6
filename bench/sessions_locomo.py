"""Session search on LoCoMo, through the real capture path: turn-level recall per search mode.

    python bench/sessions_locomo.py [FOLDER] [--conversations 26,30,41]

FOLDER holds LoCoMo conversations in the `locomo10_v2` layout (default: ../shared/data/locomo/locomo10_v2
beside the repository; CC BY-NC data, read from there, never copied into the repository). Each
conversation goes into a fresh store through `Cairn.import_locomo`, the same code `cairn
import-sessions --locomo` runs: scrubbing, index keys (key expansion: speaker, date, neighbouring
turns), vectors. Every question with evidence is then asked with `search_sessions(question, mode=M,
k=10, window=0)` for M in keyword, semantic, hybrid. Only the ranked turns count (a context window is
never a hit): recall_any@10 (some evidence turn among the 10) and recall_all@10 (every evidence turn
among them), micro-averaged over questions, as bench/locomo.py scores evidence (its loader is reused).
The index key and fusion constants (cairn.sessions: NEIGHBOURS, KEY_WEIGHT, FUSION_WEIGHTS, RRF_K)
were tuned on the dev conversations (bench/locomo.py's CALIBRATION: 26, 30, 41) only; the held-out
conversations and the total are printed apart.
A script printing figures, not a test; docs/benchmarks.md has the results.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from locomo import CALIBRATION, DEFAULT_FOLDER, load_conversation  # noqa: E402  (sets up a throwaway CAIRN_HOME)

from cairn import Cairn  # noqa: E402

MODES = ("keyword", "semantic", "hybrid")
K = 10


def run(folder: Path, names: list[str] | None) -> None:
    paths = sorted(folder.glob("*.json"), key=lambda p: (not p.stem.isdigit(), int(p.stem) if p.stem.isdigit() else 0))
    if names:
        paths = [p for p in paths if p.stem in names]
    if not paths:
        raise SystemExit(f"no conversations (*.json) in {folder}")
    groups = {g: {m: [0, 0] for m in MODES} for g in ("dev", "held out", "all")}
    counts = {g: 0 for g in groups}
    turns = 0
    clock = {"import": 0.0, **{m: 0.0 for m in MODES}}
    rows = []
    for path in paths:
        conv = load_conversation(path)
        per = {m: [0, 0] for m in MODES}
        with Cairn.open(f"sessions-locomo-{path.stem}", create=True) as memory:
            if memory.embed(["warm-up"]) is None:
                raise SystemExit("no embedding model: the semantic and hybrid figures would mislead")
            started = time.perf_counter()
            done = memory.sessions.import_locomo(path)
            clock["import"] += time.perf_counter() - started
            turns += done["turns_added"]
            vectors = memory.embed([q.text for q in conv.questions], query=True)
            for q, vector in zip(conv.questions, vectors):
                for mode in MODES:
                    started = time.perf_counter()
                    hits = memory.sessions.search(q.text, mode=mode, k=K, window=0, query_vector=vector)
                    clock[mode] += time.perf_counter() - started
                    found = {h.turn.uuid for h in hits} & q.evidence
                    per[mode][0] += bool(found)
                    per[mode][1] += found == q.evidence
        n = len(conv.questions)
        for group in ("dev" if path.stem in CALIBRATION else "held out", "all"):
            counts[group] += n
            for mode in MODES:
                groups[group][mode][0] += per[mode][0]
                groups[group][mode][1] += per[mode][1]
        rows.append(f"| {path.stem} | {n} | " + " | ".join(
            f"{per[m][0] / n:.3f} / {per[m][1] / n:.3f}" for m in MODES) + " |")
        print(rows[-1], file=sys.stderr, flush=True)
    questions = counts["all"]
    print(f"LoCoMo session search, {len(paths)} conversations, {turns} turns, {questions} questions; "
          f"recall_any@{K} / recall_all@{K}\n")
    print("| conversation | questions | " + " | ".join(MODES) + " |")
    print("|---" * (2 + len(MODES)) + "|")
    print("\n".join(rows))
    labels = {"dev": f"dev ({', '.join(CALIBRATION)})", "held out": "held out", "all": "all"}
    for group, tally in groups.items():
        if counts[group]:
            print(f"| {labels[group]} | {counts[group]} | " + " | ".join(
                f"{tally[m][0] / counts[group]:.3f} / {tally[m][1] / counts[group]:.3f}" for m in MODES) + " |")
    print(f"\nimport (scrub, index, embed): {clock['import']:.1f} s, {turns / clock['import']:.0f} turns/s; "
          + ", ".join(f"{m} {1000 * clock[m] / questions:.1f} ms/query" for m in MODES))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER)
    parser.add_argument("--conversations", help="comma-separated file stems, e.g. 26,30,41")
    args = parser.parse_args()
    run(args.folder, args.conversations.split(",") if args.conversations else None)


if __name__ == "__main__":
    main()
