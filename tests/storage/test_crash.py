"""Crash safety, small: bench/crash.py with 5 SIGKILL trials (the script's default is 100; figures in
docs/benchmarks.md). Each trial must pass integrity_check, keep every acknowledged write and leave
the FTS and vector indexes in agreement with the memory table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "crash.py"


pytestmark = pytest.mark.stress


def test_writers_killed_with_sigkill_leave_a_consistent_store_with_every_acknowledged_write():
    out = subprocess.run([sys.executable, str(SCRIPT), "--trials", "5", "--seed", "7", "--json"], capture_output=True,
                         text=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    result = json.loads(out.stdout)
    assert result["failures"] == [], result["failures"]
    assert (result["trials"], result["passed"], result["killed_with_sigkill"]) == (5, 5, 5)
    assert result["acknowledged_writes_checked"] > 0 and out.returncode == 0
