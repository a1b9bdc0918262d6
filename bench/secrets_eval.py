"""Secret detection on the labelled credential set (tests/data/credentials): recall and false positives.

    python bench/secrets_eval.py                  # every split: figures only
    python bench/secrets_eval.py --split dev --show-failures

Each text goes through what every write to a store goes through (cairn.privacy.scrub.scrub: private
spans, detect-secrets, the vendored rule sets and Cairn's rules; bench/secrets_compare.py runs the
same sentences through gitleaks', Betterleaks' and detect-secrets' own). A `secret` item is caught when its `value` no
longer appears in the scrubbed text; an `innocent` item is a false positive when the scrubbed text
differs from it at all. Prints, per split: recall (caught / secrets) and the false-positive rate
(changed / innocent). --show-failures lists the items missed or changed, for the dev split only:
the holdout split is scored as figures, so that no rule is tuned on it (tests/data/credentials/README.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "engine"))

from cairn.privacy.scrub import scrub  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "credentials"
# dev first, then every held-out split present (holdout.yaml, holdout2.yaml, holdout3.yaml, ...).
SPLITS = ("dev", *sorted(p.stem for p in DATA.glob("*.yaml") if p.stem != "dev"))


def score(split: str) -> tuple[dict[str, float], list[tuple[str, str, str]]]:
    """({recall, fp_rate, secrets, innocent}, [(id, "missed" | "changed", scrubbed text)])."""
    data = yaml.safe_load((DATA / f"{split}.yaml").read_text())
    failures = []
    caught = 0
    for item in data["secret"]:
        out = scrub(item["text"]).text
        if item["value"] in out:
            failures.append((item["id"], "missed", out))
        else:
            caught += 1
    changed = 0
    for item in data["innocent"]:
        out = scrub(item["text"]).text
        if out != item["text"]:
            changed += 1
            failures.append((item["id"], "changed", out))
    figures = {"recall": caught / len(data["secret"]), "fp_rate": changed / len(data["innocent"]),
               "secrets": len(data["secret"]), "innocent": len(data["innocent"])}
    return figures, failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=SPLITS, action="append", help="Split to score (default: all).")
    parser.add_argument("--show-failures", action="store_true", help="List failing items (dev split only).")
    args = parser.parse_args()
    if args.show_failures and args.split != ["dev"]:
        parser.error("--show-failures is for the dev split only (--split dev)")
    for split in args.split or SPLITS:
        figures, failures = score(split)
        print(f"{split}: recall {figures['recall']:.3f} ({figures['secrets']} secrets), "
              f"false positives {figures['fp_rate']:.3f} ({figures['innocent']} innocent)")
        if args.show_failures:
            for ident, what, text in failures:
                print(f"  {ident} {what}: {text!r}")


if __name__ == "__main__":
    main()
