"""The environment a composition root passes reaches the data root (issue 32): with `env` naming
CAIRN_HOME=X while this process's own environment names CAIRN_HOME=Y, nothing is created or read
under Y: not the project store, not the global store, not a backup, not a doctor check."""

from __future__ import annotations

from pathlib import Path

import pytest

import cairn
from cairn import health
from cairn.stores import admin


@pytest.fixture
def homes(tmp_path, monkeypatch, cairn_home) -> tuple[dict[str, str], Path, Path]:
    """(the env a root passes, naming X; X; Y, the process's own CAIRN_HOME, which must stay untouched)."""
    given, process = tmp_path / "given-home", tmp_path / "process-home"
    monkeypatch.setenv("CAIRN_HOME", str(process))
    monkeypatch.setenv("CAIRN_POSTGRES_URL", "postgresql://nobody@process-env.invalid/none")
    env = {k: v for k, v in __import__("os").environ.items() if k != "CAIRN_POSTGRES_URL"}
    env["CAIRN_HOME"] = str(given)
    return env, given, process


def _untouched(process: Path) -> None:
    assert not process.exists(), f"created under the process's CAIRN_HOME: {sorted(process.rglob('*'))}"


def test_an_engine_opened_with_env_keeps_every_store_in_its_data_root(homes, project):
    env, given, process = homes
    with cairn.Cairn.open(cwd=project, env=env, embedder=None) as memory:
        memory.remember("The API uses tabs", kind="convention")
        memory.remember("I prefer short answers", kind="preference", scope="global")
        assert [h.memory.text for h in memory.recall("short answers", scope="all")]
    assert (given / "stores" / "global.db").exists()
    assert (given / "stores" / f"{memory.name}.db").exists()
    _untouched(process)


def test_resolved_global_instead_looks_in_the_env_data_root(homes, project):
    env, given, process = homes
    with cairn.Cairn.open("global", env=env, embedder=None, create=True) as memory:
        memory.remember("I prefer short answers", kind="preference")
    resolved = cairn.resolve(cwd=project, env=env)
    instead = resolved.global_instead()
    assert instead is not None and instead.choice.path == given / "stores" / "global.db"
    assert not resolved.store_exists
    _untouched(process)


def test_store_administration_with_env_stays_in_its_data_root(homes):
    env, given, process = homes
    path, created = admin.create_store("notes", env=env)
    assert created and path == given / "stores" / "notes.db"
    assert [row["name"] for row in admin.list_stores(env=env)] == ["notes"]
    backup = admin.backup_store("notes", env=env)
    assert Path(backup["path"]).parent == given / "backups"
    assert admin.backups_of("notes", env=env) == [Path(backup["path"])]
    admin.rename_store("notes", "jottings", env=env)
    restored = admin.restore_store(backup["path"], name="jottings", env=env)
    assert restored["path"] == str(given / "stores" / "jottings.db")
    admin.migrate_store("jottings", "copy", env=env)
    admin.delete_store("copy", env=env)
    assert sorted(p.name for p in (given / "stores").glob("*.db")) == ["jottings.db"]
    _untouched(process)


def test_doctor_with_env_checks_its_data_root(homes):
    env, given, process = homes
    admin.create_store("notes", env=env)
    config = cairn.load_config(env=env)
    config["embedding"]["enabled"] = False  # no model to load: the stores are what is checked
    checks = {c.name: c for c in health.doctor(env=env, config=config)}
    assert str(given) in checks["data root"].detail
    assert "store notes: integrity" in checks
    _untouched(process)
