"""False positives of the credentials detector on real text people wrote, where no credential is.

    python bench/secrets_real_text.py              # figures per corpus
    python bench/secrets_real_text.py --show 20    # and the first 20 changed texts, as scrubbed

The labelled splits (tests/data/credentials) hold look-alikes written to be hard; this counts what a
user meets every day: every text goes through cairn.privacy.scrub.scrub, as every write does, and a
text is a false positive when the scrubbed text differs from it. Corpora (all in this repository or
beside it, none written for the detector):

- guidance: the statements of tests/data/work (12 repositories' own agent guidance: CLAUDE.md,
  AGENTS.md, .cursor/rules, .github/instructions), 1,400 texts;
- commits: the same repositories' commit subjects used as tasks there;
- relevance: tests/data/relevance*, other repositories' guidance and PR titles;
- locomo: the LoCoMo conversations' turns (../shared/data/locomo, benchmark use only; skipped when
  absent), everyday chat.

A changed text is not always a wrong one (a guidance file may quote a real-looking sample key), so
--show lists them to be read. Prints: corpus, texts, changed, rate.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "engine"))

from cairn.privacy.scrub import scrub  # noqa: E402

LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo10_v2"


def corpora() -> dict[str, list[str]]:
    """{corpus name: [text]}, each text once."""
    out: dict[str, list[str]] = {"guidance": [], "commits": [], "relevance": [], "locomo": []}
    for path in sorted((REPO / "tests" / "data" / "work").glob("*/*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        out["guidance"] += [s["text"] for s in data.get("statements", [])]
        out["commits"] += [t["prompt"] for t in data.get("tasks", [])]
    for path in sorted((REPO / "tests" / "data").glob("relevance*/*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        out["relevance"] += [m["text"] for m in data.get("memories", []) if isinstance(m, dict) and m.get("text")]
        out["relevance"] += [p["text"] if isinstance(p, dict) else str(p) for p in data.get("prompts", [])
                             if (p.get("text") if isinstance(p, dict) else p)]
    for path in sorted(LOCOMO.glob("*.json")) if LOCOMO.is_dir() else []:
        raw = json.loads(path.read_text(encoding="utf-8"))
        conv = raw.get("conversation", raw)
        for key, turns in conv.items():
            if key.startswith("session_") and isinstance(turns, list):
                out["locomo"] += [t["text"] for t in turns if isinstance(t, dict) and t.get("text")]
    return {name: list(dict.fromkeys(texts)) for name, texts in out.items() if texts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", type=int, default=0, metavar="N", help="List the first N changed texts.")
    args = parser.parse_args()
    shown = 0
    total = changed_total = 0
    print(f"{'corpus':<10} {'texts':>6} {'changed':>8} {'rate':>7}")
    for name, texts in corpora().items():
        changed = []
        for text in texts:
            out = scrub(text).text
            if out != text:
                changed.append((text, out))
        total += len(texts)
        changed_total += len(changed)
        print(f"{name:<10} {len(texts):>6} {len(changed):>8} {len(changed) / len(texts):>7.4f}")
        for text, out in changed:
            if shown < args.show:
                shown += 1
                print(f"    [{name}] {text[:240]!r}\n      -> {out[:240]!r}")
    print(f"{'all':<10} {total:>6} {changed_total:>8} {changed_total / total:>7.4f}")


if __name__ == "__main__":
    main()
