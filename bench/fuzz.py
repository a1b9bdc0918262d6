"""Hostile-input fuzzing at scale: tests/adapters/test_fuzz.py with N generated inputs per surface.

Surfaces: the hook's stdin, the arguments of each MCP tool tests/adapters/test_fuzz.py fuzzes, the
CLI's arguments and stdin.
Each input must get a result or one clear error, with no traceback and, for a refused write, the
store's counts unchanged (see tests/adapters/test_fuzz.py). Prints, per surface, the inputs run, failures
and wall time; a failure is printed with its smallest input, and the exit status is 1.

    python bench/fuzz.py [--examples 10000] [-k FILTER]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=10_000, help="generated inputs per surface")
    parser.add_argument("-k", default="", help="pytest -k filter (e.g. hook, mcp, cli)")
    args = parser.parse_args()
    env = {**os.environ, "CAIRN_FUZZ_EXAMPLES": str(args.examples), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:warnings", "-p", "no:cacheprovider",
               str(ROOT / "tests" / "adapters" / "test_fuzz.py"), "--hypothesis-show-statistics", "-rN",
               "--durations=0", "--durations-min=0"]
    if args.k:
        command += ["-k", args.k]
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    out = done.stdout
    # Hypothesis statistics: "tests/adapters/test_fuzz.py::NAME:" then "- during generate phase (S seconds):"
    # and "- N passing, F failing, and I invalid test cases".
    print(f"{'surface':<82} {'inputs':>7} {'failing':>7} {'invalid':>7}")
    total = failing_total = 0
    for block in re.split(r"\n(?=tests/adapters/test_fuzz\.py::)", out):
        name = re.match(r"tests/adapters/test_fuzz\.py::(\S+):", block)
        if not name:
            continue
        for phase, passing, failing, invalid in re.findall(
                r"during (\w+) phase.*?- (\d+) passing, (\d+) failing, and (\d+) invalid", block, re.DOTALL):
            if phase != "generate":
                continue
            total += int(passing) + int(failing)
            failing_total += int(failing)
            print(f"{name.group(1):<82} {int(passing) + int(failing):>7} {failing:>7} {invalid:>7}")
    print(f"total inputs {total}, failing {failing_total}, wall {time.monotonic() - started:.0f} s, "
          f"pytest exit {done.returncode}")
    if done.returncode != 0:
        print(out[-20000:])
        print(done.stderr[-5000:], file=sys.stderr)
    return 0 if done.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
