"""Side by side on the labelled credential set: Cairn's detector, gitleaks', Betterleaks' rule sets, detect-secrets.

    python bench/secrets_compare.py                    # dev and every held-out split present
    python bench/secrets_compare.py --split dev --show-failures --detector cairn
    python bench/secrets_compare.py --latency          # Cairn's scrub on a 2 KB text, warm and cold

Each detector sees the same texts (tests/data/credentials/*.yaml):
- cairn: cairn.privacy.scrub.scrub, what every write to a store goes through;
- gitleaks: gitleaks' default rule set alone (engine/cairn/assets/gitleaks.toml), run by
  cairn.privacy.secret_rules as gitleaks runs it;
- betterleaks: Betterleaks' default rule set alone (assets/betterleaks.toml) with its filters,
  token-efficiency test, skipReport and required companions (RuleSet(composite=True)), on the whole text;
- detect-secrets: Yelp's detect-secrets with its default plugins and filters (scan_line on each line).
A `secret` item is caught when its `value` no longer appears once the detector's findings are
redacted; an `innocent` item is a false positive when the detector finds anything in it. Prints
recall and false-positive rate per split and detector. --show-failures lists each scored split's
failures: only for a spent split (tuned on), never for a blind one before it is scored
(tests/data/credentials/README.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "engine"))

from cairn.privacy import secret_rules  # noqa: E402
from cairn.privacy.scrub import scrub  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "credentials"


def splits() -> list[str]:
    """dev first, then every held-out split in the data folder, by name."""
    held = sorted(p.stem for p in DATA.glob("*.yaml") if p.stem != "dev")
    return ["dev", *held]


def _redacted(text: str, spans: list[tuple[int, int]]) -> str:
    out, last = [], 0
    for start, end in sorted(spans):
        if start < last:
            start = last
        out += [text[last:start], "\0" * max(0, end - start)]
        last = max(last, end)
    return "".join(out) + text[last:]


def rules_detector(files: tuple[Path, ...], composite: bool) -> Callable[[str], str]:
    ruleset = secret_rules.RuleSet(secret_rules.load(*files), composite=composite, faithful=True)
    if composite:
        return lambda text: _redacted(text, [f.span for f in ruleset.findings(text)])
    # gitleaks runs per line on prose as Cairn does; its generic rule wants the line.
    return lambda text: "\n".join(_redacted(line, [f.span for f in ruleset.findings(line)])
                                  for line in text.split("\n"))


def detect_secrets_detector() -> Callable[[str], str]:
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    def run(text: str) -> str:
        out = []
        with default_settings():
            for line in text.split("\n"):
                spans = []
                for secret in scan_line(line):
                    value = secret.secret_value or ""
                    at = line.find(value) if value else -1
                    while value and at >= 0:
                        spans.append((at, at + len(value)))
                        at = line.find(value, at + 1)
                out.append(_redacted(line, spans))
        return "\n".join(out)
    return run


DETECTORS: dict[str, Callable[[], Callable[[str], str]]] = {
    "cairn": lambda: lambda text: scrub(text).text,
    "gitleaks": lambda: rules_detector((secret_rules.GITLEAKS_FILE,), composite=False),
    "betterleaks": lambda: rules_detector((secret_rules.BETTERLEAKS_FILE,), composite=True),
    "detect-secrets": detect_secrets_detector,
}


def score(split: str, detect: Callable[[str], str]) -> tuple[dict[str, float], list[tuple[str, str, str]]]:
    """({recall, fp_rate, secrets, innocent, ms}, [(id, "missed" | "changed", output)])."""
    data = yaml.safe_load((DATA / f"{split}.yaml").read_text())
    failures, caught, changed = [], 0, 0
    start = time.perf_counter()
    for item in data["secret"]:
        out = detect(item["text"])
        if item["value"] in out:
            failures.append((item["id"], "missed", out))
        else:
            caught += 1
    for item in data["innocent"]:
        out = detect(item["text"])
        if out != item["text"]:
            changed += 1
            failures.append((item["id"], "changed", out))
    n = len(data["secret"]) + len(data["innocent"])
    return {"recall": caught / len(data["secret"]), "fp_rate": changed / len(data["innocent"]),
            "secrets": len(data["secret"]), "innocent": len(data["innocent"]),
            "ms": (time.perf_counter() - start) * 1000 / n}, failures


# A 2 KB note of prose with one credential and several look-alikes (a hash, a policy name, a path).
_PARAGRAPH = ("We moved the deploy target to Fly.io last week; the staging API key is sk_live_4eC39HqLyjWDarjtT1zdp7dc "
              "and the token for the metrics push is set in the vault. Run ruff check before pushing, and keep the "
              "migrations in order: 0012 adds the review table, 0013 the index. The password policy is "
              "PasswordPolicyV2. Commit 589bb18f655cd1861d536af07df51ad9 fixed the cache key; see docs/privacy.md "
              "for what is redacted. ")
_COLD = ("import sys, time; t = time.perf_counter(); from cairn.privacy.scrub import scrub; "
         "scrub(\"the api_key = 'Zf3D0LXCM3EIMbgJpUNnkRtOfOueHznB' and the token is \"\n"
         "      \"17ef18449886860c353fcab472993eec\"); "
         "print((time.perf_counter() - t) * 1000)")


def latency(runs: int = 200, cold_runs: int = 5) -> None:
    """Prints p50 / p95 of scrub() on a 2 KB text (ms, `runs` calls after one warm-up) and the
    median cost of a fresh process's first scrub (import, rule load, first generic finding)."""
    import statistics
    import subprocess

    text = (_PARAGRAPH * 6)[:2048]
    scrub(text)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        scrub(text)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    print(f"scrub, 2 KB text: p50 {statistics.median(times):.2f} ms, p95 {times[int(0.95 * runs) - 1]:.2f} ms "
          f"({runs} calls)")
    engine = str(Path(__file__).resolve().parent.parent / "engine")
    cold = [float(subprocess.run([sys.executable, "-c", _COLD], capture_output=True, text=True, check=True,
                                 env={"PYTHONPATH": engine, "PATH": "/usr/bin:/bin"}).stdout) for _ in range(cold_runs)]
    print(f"first scrub in a fresh process (import, rule load, first generic finding): "
          f"median {statistics.median(cold):.0f} ms ({cold_runs} processes)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", action="append", help="Split to score (default: dev and every held-out split).")
    parser.add_argument("--detector", choices=list(DETECTORS), action="append", help="Default: all four.")
    parser.add_argument("--show-failures", action="store_true", help="List failing items of each split scored.")
    parser.add_argument("--latency", action="store_true", help="Time Cairn's scrub instead (2 KB text, cold start).")
    args = parser.parse_args()
    if args.latency:
        latency()
        return
    chosen = args.split or splits()
    detectors = {name: DETECTORS[name]() for name in args.detector or DETECTORS}
    print("| split | detector | recall | false positives | ms / text |")
    print("|---|---|---|---|---|")
    for split in chosen:
        for name, detect in detectors.items():
            figures, failures = score(split, detect)
            print(f"| {split} ({figures['secrets']:.0f} / {figures['innocent']:.0f}) | {name} | "
                  f"{figures['recall']:.3f} | {figures['fp_rate']:.3f} | {figures['ms']:.1f} |")
            if args.show_failures:
                for ident, what, text in failures:
                    print(f"    {ident} {what}: {text!r}")


if __name__ == "__main__":
    main()
