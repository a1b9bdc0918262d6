"""Vector backends agree; configuration is validated; concurrent writers do not lose memories."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from cairn import Cairn, ConfigError, Draft
from cairn.config import load_config
from cairn.storage.vectors import NumpyIndex, SqliteVecIndex


def _build(tmp_path, backend: str, hashing):
    (tmp_path / f"{backend}.yaml").write_text(f"store:\n  vector_backend: {backend}\n")
    os.environ["CAIRN_CONFIG"] = str(tmp_path / f"{backend}.yaml")
    memory = Cairn.open(f"vec-{backend}", create=True, embedder=hashing)
    memory.remember_many([Draft(f"memory about topic {n} and subject {n % 7} with detail {n * 13 % 11}",
                                kind=("fact", "decision")[n % 2], valid_from=1_700_000_000_000 + n * 1000)
                          for n in range(120)], detect=False)
    return memory


def test_numpy_fallback_returns_the_same_results_as_sqlite_vec(tmp_path, minilm):
    hashing = minilm  # a real model: distinct similarities, so the order is fully determined
    vec = _build(tmp_path, "sqlite-vec", hashing)
    npy = _build(tmp_path, "numpy", hashing)
    assert isinstance(vec.store.vector_index, SqliteVecIndex)
    assert isinstance(npy.store.vector_index, NumpyIndex)
    from cairn.storage.sql import Filters

    for query in ("topic 5 subject 3", "detail 7", "memory about subject 2"):
        q = hashing.embed_one(query)
        for filters in (Filters(), Filters(kinds=("decision",)), Filters(as_of=1_700_000_050_000)):
            a = vec.store.vector_search(q, filters, 10)
            b = npy.store.vector_search(q, filters, 10)
            assert [s for s, _ in a] == [s for s, _ in b]
            assert np.allclose([c for _, c in a], [c for _, c in b], atol=1e-5)
        assert [h.memory.text for h in vec.recall(query)] == [h.memory.text for h in npy.recall(query)]
    vec.close()
    npy.close()


def test_stdlib_sqlite_without_extensions_falls_back_to_numpy(tmp_path, hashing):
    import subprocess
    import sys

    code = (
        "import sys; sys.modules.update(dict.fromkeys(['sqlean', 'pysqlite3', 'pysqlite3.dbapi2']))  # stdlib only\n"
        "from cairn import Cairn; from cairn.embedder import HashingEmbedder\n"
        "m = Cairn.open('fallback', create=True, embedder=HashingEmbedder())\n"
        "m.remember('The queue is RabbitMQ', kind='fact')\n"
        "print(m.store.vector_index.name, m.recall('queue rabbitmq')[0].reasons['vector']['rank'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ)
    assert out.stdout.split() == ["numpy", "1"]


def test_config_rejects_unknown_keys_and_wrong_types_naming_the_key(tmp_path, monkeypatch):
    path = tmp_path / "config.yaml"
    monkeypatch.setenv("CAIRN_CONFIG", str(path))
    path.write_text("recall:\n  k: 5\n  depth: 3\n")
    with pytest.raises(ConfigError, match="unknown key 'recall.depth'"):
        load_config()
    path.write_text("hooks:\n  brief_chars: lots\n")
    with pytest.raises(ConfigError, match="key 'hooks.brief_chars'"):
        load_config()
    path.write_text("hooks:\n  brief_chars: 50000\n")
    with pytest.raises(ConfigError, match="hooks.brief_chars"):
        load_config()
    path.write_text("recall: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config()


def test_project_config_overrides_user_config(tmp_path, monkeypatch):
    user = tmp_path / "user.yaml"
    user.write_text("recall:\n  k: 7\nhooks:\n  prompt_k: 2\n")
    monkeypatch.setenv("CAIRN_CONFIG", str(user))
    project = tmp_path / "p"
    project.mkdir()
    (project / ".cairn.yaml").write_text("hooks:\n  prompt_k: 4\n")
    config = load_config(project)
    assert config["recall"]["k"] == 7
    assert config["hooks"]["prompt_k"] == 4
    assert config["hooks"]["brief_chars"] == 16000


def _writer(home: str, worker: int, count: int) -> None:
    os.environ["CAIRN_HOME"] = home
    with Cairn.open("busy", embedder=None) as memory:
        for n in range(count):
            memory.remember(f"worker {worker} note {n}", kind="fact", detect=False)


def test_concurrent_writers_from_several_processes_lose_nothing(cairn_home):
    with Cairn.open("busy", create=True, embedder=None):
        pass
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(cairn_home), w, 40)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with Cairn.open("busy", embedder=None) as memory:
        assert memory.store.counts()["current"] == 160


def test_the_exact_shortcut_for_the_current_view_matches_the_filtered_search(tmp_path, minilm, monkeypatch):
    from cairn.storage.sql import Filters
    from cairn.storage.sqlite import SqliteStore

    memory = Cairn.open("shortcut", create=True, embedder=minilm)
    results = memory.remember_many([Draft(f"Service {n} stores its sessions in Redis cluster {n % 5}", kind="fact")
                                    for n in range(60)], detect=False)
    for result in results[:20]:  # 20 superseded, 5 expired: all must stay out, in both paths
        memory.replace(result.memory.id, result.memory.text + " (moved to Valkey)")
    memory.remember_many([Draft(f"Old note {n} about Redis sessions", kind="fact", valid_from="2020-01-01",
                                valid_to="2021-01-01") for n in range(5)], detect=False)
    store = memory.store
    assert store.not_current_count() == 25
    query = minilm.embed_one("where are sessions stored?")
    fast_vec, fast_kw = store.vector_search(query, Filters(), 10), store.keyword_search('"redis"', Filters(), 10)
    monkeypatch.setattr(SqliteStore, "FAST_PATH_MAX_EXCLUDED", -1)
    assert store.vector_search(query, Filters(), 10) == fast_vec
    assert store.keyword_search('"redis"', Filters(), 10) == fast_kw
    assert len(fast_vec) == len(fast_kw) == 10
    memory.close()


def test_a_validated_config_is_read_back_without_yaml_or_jsonschema(tmp_path, cairn_home, monkeypatch):
    """PyYAML + jsonschema cost more than a cold hook's budget: a file validated once is read back
    from the data root's cache; an edit is validated again (an invalid edit is still refused)."""
    config = tmp_path / "config.yaml"
    config.write_text("hooks:\n  prompt_k: 3\n")
    monkeypatch.setenv("CAIRN_CONFIG", str(config))
    cairn_home.mkdir(parents=True, exist_ok=True)
    probe = ("import sys, json; from cairn.config import load_config; c = load_config(); "
             "print(json.dumps([c['hooks']['prompt_k'], 'yaml' in sys.modules, 'jsonschema' in sys.modules]))")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "engine")}

    def run() -> list:
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
        return json.loads(out.stdout)

    assert run() == [3, True, True]  # first read: parsed and validated
    assert run() == [3, False, False]  # then from the cache
    cached = list((cairn_home / "cache").glob("config-*.json"))
    assert len(cached) == 1 and stat.S_IMODE(cached[0].stat().st_mode) == 0o600
    assert stat.S_IMODE((cairn_home / "cache").stat().st_mode) == 0o700
    # An entry not rewritten for 30 days goes when a new one is written; fresh entries stay.
    month_old = time.time() - 31 * 86400
    os.utime(cached[0], (month_old, month_old))
    config.write_text("hooks:\n  prompt_k: 4\n")
    assert run() == [4, True, True]
    assert not cached[0].exists()
    config.write_text("hooks:\n  prompt_k: 5\n")
    assert run() == [5, True, True]
    assert len(list((cairn_home / "cache").glob("config-*.json"))) == 2
    config.write_text("hooks:\n  prompt_k: many\n")
    with pytest.raises(ConfigError, match="prompt_k"):
        load_config()
