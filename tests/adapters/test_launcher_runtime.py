"""hooks/runtime.sh picks the installed runtime only when it was installed from this plugin's lock:
by the lock's sha256 read with a shell builtin (no process on every hook), else by comparing the
locks with cmp (a runtime installed before it kept its hash)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "engine" / "runtime-requirements.txt"


def test_the_shipped_hash_is_the_locks():
    # `make lock` writes it; a stale one costs a cmp process on every hook (never a wrong runtime).
    assert (REPO / "engine" / "runtime-requirements.sha256").read_text().strip() == \
        hashlib.sha256(LOCK.read_bytes()).hexdigest()


def _launcher_python(tmp_path: Path, lock: bytes, sha: str | None) -> tuple[str, bool]:
    """(the $python runtime.sh chose, whether it ran cmp) for a venv holding `lock` and `sha`."""
    data = tmp_path / "data"
    venv = data / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(shutil.which("python3") or "/usr/bin/python3")
    (venv / "requirements.txt").write_bytes(lock)
    if sha is not None:
        (venv / "requirements.sha256").write_text(sha + "\n")
    spy = tmp_path / "bin"
    spy.mkdir()
    (spy / "cmp").write_text(f'#!/bin/sh\ntouch "{tmp_path}/cmp-ran"\nexec {shutil.which("cmp")} "$@"\n')
    (spy / "cmp").chmod(0o755)
    env = {**os.environ, "PATH": f"{spy}:{os.environ['PATH']}", "CLAUDE_PLUGIN_DATA": str(data)}
    env.pop("CAIRN_RUNTIME_PYTHON", None)
    script = '. "${0%/*}/runtime.sh"; printf %s "$python"'
    out = subprocess.run(["sh", "-c", script, str(REPO / "hooks" / "cairn-hook")], env=env, capture_output=True,
                         text=True, check=True).stdout
    return out, (tmp_path / "cmp-ran").exists()


@pytest.mark.parametrize("lock, sha, chosen, cmp_ran", [
    ("same", "same", True, False),   # installed by this bootstrap: the hashes agree, no process
    ("same", None, True, True),      # installed before the venv kept its hash: cmp
    ("other", "other", False, True),  # another version's runtime: not used
])
def test_the_runtime_is_the_one_installed_from_this_lock(tmp_path, lock, sha, chosen, cmp_ran):
    this = LOCK.read_bytes()
    other = this + b"# another version\n"
    digests = {"same": hashlib.sha256(this).hexdigest(), "other": hashlib.sha256(other).hexdigest(), None: None}
    python, ran = _launcher_python(tmp_path, this if lock == "same" else other, digests[sha])
    assert python.endswith("/venv/bin/python") is chosen, python
    assert ran is cmp_ran
