"""What Cairn injects into Claude's context: the session brief and the memories relevant to a prompt.

Both are plain factual text (hooks#add-context-for-claude: text phrased as commands can trip
prompt-injection defences), bounded in characters, and cite each memory as [mem:ID] with its date so
Claude can recall, replace or forget it.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Collection
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from .embedder import EQUIVALENT_WEIGHTS
from .errors import CairnError
from .models import Hit, Memory, Order
from .paths import GLOBAL_STORE
from .render import context_line as memory_line
from .text import CJK_CHARS, content_words

if TYPE_CHECKING:
    from .engine import Cairn

log = logging.getLogger(__name__)

# Words of prompts that carry no topic: acknowledgements and continuations ("ok", "yes please",
# "sure, go ahead", "looks good, continue"). A prompt made only of these is trivial.
TRIVIAL_WORDS = frozenset("""
    ok okay k kk yes y yep yeah yup ya no n nope nah sure thanks thank you thx ty cheers continue go on
    ahead proceed next done lgtm sounds looks good great fine cool nice perfect awesome alright right
    do it that this please pls plz retry again try keep going carry now then and so lets let's
    """.split()) | frozenset(
    # The same in Chinese, Japanese and Korean, as whole words (a CJK run has no spaces inside).
    """好 好的 好吧 嗯 行 可以 对 是的 没问题 收到 明白 谢谢 继续 继续吧 请继续
    はい うん ええ 了解 了解です 承知しました 続けて 続けてください お願いします ありがとう ありがとうございます
    네 예 좋아요 계속 계속해 감사합니다 알겠습니다""".split())
_CITED = re.compile(r"\[mem:([0-9A-HJKMNP-TV-Z]{26})\]")  # a ULID, not the "[mem:ID]" of a header
# A slash command: "/name" or "/plugin:name" as the first word (a path such as /etc/hosts is not).
_SLASH_COMMAND = re.compile(r"^/[A-Za-z][\w.:-]*(?:\s|$)")
_CJK_CHAR = re.compile(f"[{CJK_CHARS}]")

# Relevance gate for per-prompt injection (`passes`). Precision first: a memory injected for
# nothing costs the user tokens and attention; a memory missed can still be found with memory_recall.
# With the prompt's vector (all-MiniLM-L6-v2), a memory passes with
#   cosine >= STRONG_COSINE, or
#   cosine >= WEAK_COSINE and at least MIN_SHARED_STEMS content stems (Snowball) shared with the prompt;
# keyword-only (no model, or a memory still awaiting its vector), with at least
# KEYWORD_MIN_SHARED_STEMS shared stems: no cosine backs the words, so one more is asked for.
# Either count is raised to SHARED_FRACTION of the prompt's stems for long prompts (a pasted
# traceback shares a few words with almost anything) and lowered to all of them for short ones
# ("deploy?" needs its one stem).
#
# The values are round points on a plateau of a sweep with bench/prompt_gate.py on
# tests/data/prompt_relevance.yaml (prompts labelled before tuning); the figures, the sweep and what
# limits recall are in docs/benchmarks.md, "Per-prompt injection", "Calibration history".
# The cosines are all-MiniLM-L6-v2's (either backend: their vectors agree within 0.01; `_calibrated`
# knows the model by its weights). Another model
# spreads cosines differently (multilingual-e5-small puts unrelated texts near 0.75), so with it the
# gate judges by shared words alone, as keyword-only, until its own thresholds are fitted.
GATE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
STRONG_COSINE = 0.50
WEAK_COSINE = 0.35
MIN_SHARED_STEMS = 3
# multilingual-e5-small (E5_MODEL) puts every pair of texts between ~0.70 and ~0.95 (unrelated ones
# near 0.75), so its gate has its own thresholds: the most precise point of a plateau (strong
# 0.91-0.93 give the same figures) of a sweep with bench/multilingual_eval.py --sweep on the dev
# splits only (English tests/data/relevance dev + paraphrase, Chinese and Japanese
# tests/data/relevance-cjk dev): pooled precision 0.71, must-recall 0.31, silence 1.00; the held-out
# figures are in docs/benchmarks.md, "Multilingual". E5 covers Chinese, Japanese, Korean and English,
# so its cosines judge CJK prompts too; all-MiniLM-L6-v2 was trained on English only, so with it a
# CJK prompt (is_cjk) is judged by shared words alone, as keyword-only.
E5_MODEL = "intfloat/multilingual-e5-small"
E5_STRONG_COSINE = 0.91
E5_WEAK_COSINE = 0.86
E5_MIN_SHARED_STEMS = 2
KEYWORD_MIN_SHARED_STEMS = 4
SHARED_FRACTION = 0.25
# How many recall hits the gate reads. Hybrid: as many as recall keeps per retriever, because the
# gate judges cosines and convex fusion weights BM25 at 0.65, so in a large store a memory with a
# strong cosine but no shared word can rank below many weak lexical matches. Keyword-only: 3k,
# since BM25 already orders by shared words (and every hit read costs a stemming).
HYBRID_DEPTH = 50
MAX_PROMPT_CHARS = 2000  # of a prompt, embedded, searched and stemmed (a pasted log can be huge)
IDF_MAX_TERMS = 48  # distinct words of a prompt whose store frequency is looked up
# The gate's second route (rare_match), on the store's own word frequencies (TermWeights): a memory
# sharing at least RARE_MIN_SHARED of the prompt's stems that cover RARE_COVERAGE of its IDF weight
# (a stem no memory holds weighing ABSENT_WEIGHT of its IDF), with a cosine of at least RARE_FLOOR;
# keyword-only, with no cosine to back the words, KEYWORD_RARE_COVERAGE. Calibrated with
# bench/gate_sweep.py on the dev split of tests/data/relevance (memories with their applies-when
# phrases) and the paraphrase class; curves and the chosen point: docs/benchmarks.md, "Applies when
# and the store's word frequencies".
ABSENT_WEIGHT = 0.5
RARE_COVERAGE = 0.45
RARE_MIN_SHARED = 2
RARE_FLOOR = 0.30
KEYWORD_RARE_COVERAGE = 0.6

# Session brief: the kinds listed by importance, each under its title; then the most recent memories.
BRIEF_SECTIONS = (("decision", "Decisions"), ("convention", "Conventions"), ("preference", "Preferences"))
BRIEF_KINDS = tuple(kind for kind, _ in BRIEF_SECTIONS)
BRIEF_MEMORY_CHARS = 200  # one memory's text in the brief: more lines fit; memory_recall has the rest
RECENT_SHARE = 3  # the most recent memories always get at least 1/3 of the brief's budget
MAP_TAGS = 8  # tags named in the brief's map of the store
# The user's global store (preferences that hold in every project) gets its own section of the
# brief, at most 1/GLOBAL_SHARE of the budget: the project's own memories come first.
GLOBAL_SHARE = 4
GLOBAL_TITLE = "Yours, in every project (global store)"


def is_trivial(prompt: str) -> bool:
    """Slash commands, acknowledgements, and prompts without a single content word."""
    text = prompt.strip()
    if not text or _SLASH_COMMAND.match(text):
        return True
    words = re.findall(r"[\w']+", text.casefold())
    if all(w in TRIVIAL_WORDS for w in words):
        return True
    return not content_words(text)


def _fill(header: str, lines: list[str], budget: int) -> str | None:
    """header + as many whole lines as fit in `budget` characters; None when no line fits."""
    out, used = [header], len(header)
    for line in lines:
        if used + 1 + len(line) > budget:
            continue
        out.append(line)
        used += 1 + len(line)
    return "\n".join(out) if len(out) > 1 else None


def session_brief(memory: Cairn, *, budget: int = 1500, global_only: bool = False) -> str | None:
    """The project's most important current decisions, conventions and preferences (importance,
    then newest first), then the user's own from the global store, then the most recent other
    memories, within `budget` characters.

    The important ones may fill the budget up to 1/RECENT_SHARE short of it, so the recent ones
    always get a part; the global store's take at most 1/GLOBAL_SHARE. Whole lines only. It ends
    with a map of the rest (`store_map`), so Claude knows when memory_recall is worth a call.
    global_only: `memory` is opened on the global store in place of a project that has no store yet;
    the brief is then the global store's decisions, conventions and preferences, in the whole budget.
    None when no store has a current memory or nothing fits."""
    on_global = memory.name == GLOBAL_STORE  # also when CAIRN_STORE names it: no section of its own
    counts = memory.counts()
    global_important = [] if on_global else _global_important(memory, budget // 40 + 1)
    if (counts["current"] == 0 and not global_important) or budget <= 0:
        return None
    if global_only:
        header = (f"Cairn memory: this project has no store yet; your global store holds "
                  f"{counts['current']} current memories that hold in every project. "
                  "Cite as [mem:ID]; the memory_recall tool finds more.")
    else:
        header = (f"Cairn project memory ({counts['current']} current memories in store {memory.name}). "
                  "Cite as [mem:ID]; the memory_recall tool finds more.")
    footer = store_map(memory) if counts["current"] else ""
    if footer and len(header) + 1 + len(footer) < budget // 2:  # the map never crowds out the memories
        budget -= 1 + len(footer)
    else:
        footer = ""
    limit = budget // 40 + 1  # more memories than can fit: a line is longer than 40 characters
    important = memory.list(kinds=list(BRIEF_KINDS), limit=limit, scope="project",
                            order=Order.IMPORTANCE)
    titles = dict(BRIEF_SECTIONS)
    sections: dict[str, list[str]] = {kind: [] for kind, _ in BRIEF_SECTIONS}
    sections["global"], sections["recent"] = [], []
    titles["global"], titles["recent"] = GLOBAL_TITLE, "Recent"
    used = len(header)
    shown: set[str] = set()

    def add(m: Memory, section: str, cap: int) -> bool:
        nonlocal used
        line = memory_line(m, with_kind=section in ("global", "recent"), limit=BRIEF_MEMORY_CHARS)
        cost = 1 + len(line) + (0 if sections[section] else 2 + len(titles[section]))
        if used + cost > cap:
            return False
        sections[section].append(line)
        shown.add(m.id)
        used += cost
        return True

    # In order of priority, stopping at the first line that does not fit: a shorter, less important
    # memory never takes the place of a more important one.
    # The recent memories' share is kept free, except in a global-only brief, which lists no others.
    important_cap = budget if global_only else budget - budget // RECENT_SHARE
    for m in important:
        if not add(m, m.kind, important_cap):
            break
    global_cap = min(important_cap, used + budget // GLOBAL_SHARE)
    for m in global_important:
        if not add(m, "global", global_cap):
            break
    for m in memory.list(limit=limit + len(shown), scope="project") if not global_only else ():
        if m.id not in shown and not add(m, "recent", budget):
            break
    lines = [header]
    for section, items in sections.items():
        if items:
            lines += [f"{titles[section]}:", *items]
    if len(lines) == 1:
        return None
    return "\n".join(lines + ([footer] if footer else []))


def _global_important(memory: Cairn, limit: int) -> list[Memory]:
    """The global store's current decisions, conventions and preferences by importance; [] when it
    does not exist or cannot be read (a broken or foreign-model global store never costs the
    project its brief: the reason goes to the hook log)."""
    try:
        return memory.list(kinds=list(BRIEF_KINDS), limit=limit, scope="global",
                           order=Order.IMPORTANCE)
    except CairnError as exc:
        log.warning("session brief: the global store is left out: %s", exc)
        return []


def store_map(memory: Cairn, *, tags: int = MAP_TAGS) -> str:
    """One line on what the store holds: current memories per kind and the most used tags, e.g.
    "In memory: 12 decisions, 30 facts, 3 tasks; tags: deploy 12, testing 5"."""
    topics = memory.topics(tags=tags)
    kinds = ", ".join(f"{n} {kind}{'s' if n != 1 else ''}" for kind, n in
                      sorted(topics["kinds"].items(), key=lambda kv: (-kv[1], kv[0])))
    line = f"In memory: {kinds}"
    if topics["tags"]:
        line += "; tags: " + ", ".join(f"{tag} {n}" for tag, n in topics["tags"])
    return line + "."


def stems(text: str) -> set[str]:
    """Snowball (Porter 2) stems of the content words of `text`: "Deploys" and "deploy" share one."""
    return set(_stem_text(text))


@lru_cache(maxsize=4096)
def _stem_text(text: str) -> frozenset[str]:
    # Memories recur across prompts in the warm process; the pure-Python stemmer costs ~1 ms a text.
    return frozenset(_stem_word(word) for word in content_words(text))


@lru_cache(maxsize=65536)
def _stem_word(word: str) -> str:
    # Memories are many and varied but their words are few: cached per word, a text seen for the
    # first time is stemmed from the cache too (measured: stemming was half of a warm prompt's
    # recall at 10,000 memories). A stemmer per call: the stemmer keeps state while it works.
    import snowballstemmer

    return snowballstemmer.stemmer("english").stemWord(word)


def shares_enough(prompt_stems: set[str], memory_text: str, minimum: int) -> bool:
    """At least `minimum` content stems in common and SHARED_FRACTION of the prompt's (a long prompt
    shares a few words with almost anything), or every stem of a prompt with fewer."""
    if not prompt_stems:
        return False
    shared = len(prompt_stems & _stem_text(memory_text))
    need = max(minimum, math.ceil(SHARED_FRACTION * len(prompt_stems)))
    return shared >= min(need, len(prompt_stems))


@dataclass(frozen=True)
class TermWeights:
    """How informative each content stem of a prompt is in this store: its IDF,
    ln(1 + (N - df + 0.5) / (df + 0.5)) as BM25 computes it, N the store's keyword-indexed memories
    and df those containing the stem (text or applies-when). A stem no memory contains gets its df
    of 0 (the highest IDF): it tells that the prompt asks about something the store does not hold."""

    idf: dict[str, float]
    df: dict[str, int]
    total: int

    def coverage(self, shared: Collection[str], absent: float | None = None) -> float:
        """The IDF-weighted share of the prompt's stems that `shared` (stems a memory has) covers,
        0..1: high when the memory holds the prompt's rare words, low when it shares only words
        common in this store, or a few of a prompt that is mostly about something else. absent: the
        weight of a stem no memory holds, as a multiple of its IDF (default ABSENT_WEIGHT)."""
        absent = ABSENT_WEIGHT if absent is None else absent
        weight = {s: idf * (absent if self.df.get(s) == 0 else 1.0) for s, idf in self.idf.items()}
        whole = sum(weight.values())
        return sum(weight.get(s, 0.0) for s in shared) / whole if whole else 0.0


def term_weights(memory: Cairn, prompt: str) -> TermWeights:
    """The IDF in the project store of each content stem of `prompt` (the first IDF_MAX_TERMS
    distinct words are looked up, one index lookup each; later ones count as absent)."""
    words = list(dict.fromkeys(content_words(prompt)))
    phrases = {w: '"' + w.replace('"', '""') + '"' for w in words[:IDF_MAX_TERMS]}
    total, counts = memory.term_counts(phrases.values()) if phrases else (0, {})
    df: dict[str, int] = {}
    for word in words:
        stem = _stem_word(word)
        df[stem] = max(df.get(stem, 0), counts.get(phrases.get(word, ""), 0))
    idf = {stem: math.log(1 + (total - n + 0.5) / (n + 0.5)) for stem, n in df.items()}
    return TermWeights(idf, df, total)


@dataclass(frozen=True)
class CosineGate:
    """One model's cosine thresholds (see the constants above). multilingual: whether its cosines
    also judge CJK prompts (else those are judged by shared words alone)."""

    strong: float
    weak: float
    min_shared: int
    multilingual: bool
    rare_floor: float = 0.0  # the least cosine for the rare-words route (rare_match)


def cosine_gate(model_name: str | None) -> CosineGate | None:
    """The gate fitted for `model_name` (an embedder's model_name), or None for a model without one
    (its prompts are judged by shared words alone). Read at call time, so a sweep may set the
    module's constants."""
    if model_name == GATE_MODEL:
        return CosineGate(STRONG_COSINE, WEAK_COSINE, MIN_SHARED_STEMS, multilingual=False, rare_floor=RARE_FLOOR)
    if model_name == E5_MODEL:
        # Not calibrated for E5's rare-words route: its weak threshold, where its cosines start to mean something.
        return CosineGate(E5_STRONG_COSINE, E5_WEAK_COSINE, E5_MIN_SHARED_STEMS, multilingual=True,
                          rare_floor=E5_WEAK_COSINE)
    return None


def is_cjk(text: str) -> bool:
    """Whether `text` is written mostly in Chinese, Japanese or Korean: at least 2 CJK characters and
    at least a quarter of its letters (code names and commands in Latin letters are common in a CJK
    prompt: "给 @tarojs/cli 加一个依赖 chalk" is CJK)."""
    cjk = len(_CJK_CHAR.findall(text))
    if cjk < 2:
        return False
    letters = sum(1 for ch in text if ch.isalpha())
    return cjk * 4 >= letters


def passes(cosine: float | None, prompt_stems: set[str], memory_text: str, gate: CosineGate | None = None) -> bool:
    """The relevance gate (constants above). cosine None (keyword-only recall, or a memory still
    awaiting its vector): the shared stems alone decide, with the keyword-only minimum. gate: the
    thresholds for the model that gave `cosine` (default all-MiniLM-L6-v2's)."""
    if cosine is None:
        return shares_enough(prompt_stems, memory_text, KEYWORD_MIN_SHARED_STEMS)
    gate = gate or cosine_gate(GATE_MODEL)
    if cosine >= gate.strong:
        return True
    return cosine >= gate.weak and shares_enough(prompt_stems, memory_text, gate.min_shared)


def rare_match(cosine: float | None, prompt_stems: set[str], memory_text: str, weights: TermWeights | None,
               gate: CosineGate | None = None) -> bool:
    """The gate's second route, on this store's own word frequencies: the memory (text and applies-when
    phrases) holds at least RARE_MIN_SHARED of the prompt's content stems (all of a shorter prompt's)
    covering at least RARE_COVERAGE of the prompt's IDF weight (TermWeights.coverage), and, with a
    cosine, the cosine is at least the gate's rare_floor; without one (keyword-only),
    KEYWORD_RARE_COVERAGE. weights None (a CJK prompt, whose bigrams
    this was not calibrated on): never."""
    if weights is None or not prompt_stems:
        return False
    shared = prompt_stems & _stem_text(memory_text)
    need = KEYWORD_RARE_COVERAGE if cosine is None else RARE_COVERAGE
    if len(shared) < min(RARE_MIN_SHARED, len(prompt_stems)) or weights.coverage(shared) < need:
        return False
    gate = gate or cosine_gate(GATE_MODEL)
    return cosine is None or cosine >= gate.rare_floor


def is_relevant(hit: Hit, prompt_stems: set[str], weights: TermWeights | None = None) -> bool:
    """The gate on a recall hit, with the cosine recall reported for it (if any)."""
    cosine = hit.reasons.get("vector", {}).get("cosine")
    return (passes(cosine, prompt_stems, hit.memory.passage)
            or rare_match(cosine, prompt_stems, hit.memory.passage, weights))


def _cosines(memory: Cairn, hits: list[Hit], query_vector) -> dict[str, float]:
    """Cosines of the hits, including those only BM25 found: a memory outside the vector candidates
    has a low cosine, not an unknown one, and must not be judged by its words alone. Memories
    without a vector (awaiting embedding) are left out."""
    out = {h.memory.id: c for h in hits if (c := h.reasons.get("vector", {}).get("cosine")) is not None}
    missing = [h.memory.id for h in hits if h.memory.id not in out]
    if missing:
        out.update(memory.cosines(missing, query_vector))
    return out


def _gate_for(embedder) -> CosineGate | None:
    """The cosine gate for an embedder: all-MiniLM-L6-v2's for its weights under any name or backend
    (`_calibrated`), another model's by its name; None for a model without one, or for weights other
    than the fitted ones under the default model's name."""
    if embedder is None:
        return None
    if _calibrated(embedder):
        return cosine_gate(GATE_MODEL)
    return None if embedder.model_name == GATE_MODEL else cosine_gate(embedder.model_name)


def _calibrated(embedder) -> bool:
    """Whether the gate's cosine thresholds fit this embedder's vectors: all-MiniLM-L6-v2's weights
    (either backend, or a copy under another name), or, while the weights are not known, its name."""
    if embedder is None:
        return False
    if embedder.weights:
        return embedder.weights in EQUIVALENT_WEIGHTS[GATE_MODEL]
    return embedder.model_name == GATE_MODEL


def relevant_hits(memory: Cairn, prompt: str, *, k: int = 5, query_vector=None,
                  exclude: Collection[str] = ()) -> list[Hit]:
    """Up to k current memories that pass the relevance gate, in recall order; [] for trivial prompts.

    query_vector: the prompt's vector (hybrid), or None for keyword-only recall; ignored for a model
    the gate has no thresholds for (cosine_gate), and for a CJK prompt (is_cjk) with a model that
    does not cover CJK. exclude: ids never returned (memories already in the session's context), left
    out before the k cut."""
    if k <= 0 or is_trivial(prompt):
        return []
    text = prompt[:MAX_PROMPT_CHARS]
    words = stems(text)
    gate = _gate_for(memory.embedder)
    cjk = is_cjk(text)
    if gate is None or (not gate.multilingual and cjk):
        query_vector = None  # no thresholds for this model's cosines, or not on this language
    weights: list[TermWeights] = []  # looked up once, and only for a hit that may take the second route

    def relevant(hit: Hit, cosine: float | None) -> bool:
        if passes(cosine, words, hit.memory.passage, gate):
            return True
        if cjk or len(words & _stem_text(hit.memory.passage)) < min(RARE_MIN_SHARED, len(words)):
            return False
        if not weights:
            weights.append(term_weights(memory, text))
        return rare_match(cosine, words, hit.memory.passage, weights[0], gate)

    if query_vector is None:
        hits = memory.recall(text, k=k * 3 + len(exclude), use_vectors=False, scope="project")
        return [h for h in hits if h.memory.id not in exclude
                and relevant(h, h.reasons.get("vector", {}).get("cosine"))][:k]
    hits = memory.recall(text, k=max(k * 3, HYBRID_DEPTH) + len(exclude), query_vector=query_vector, scope="project")
    hits = [h for h in hits if h.memory.id not in exclude]
    cosines = _cosines(memory, hits, query_vector)
    return [h for h in hits if relevant(h, cosines.get(h.memory.id))][:k]


def prompt_context(memory: Cairn, prompt: str, *, k: int = 5, budget: int = 1200, query_vector=None,
                   exclude: Collection[str] = ()) -> str | None:
    """The memories relevant to `prompt`, formatted within `budget` characters; None when none is.
    exclude: ids already in the session's context (see relevant_hits)."""
    hits = relevant_hits(memory, prompt, k=k, query_vector=query_vector, exclude=exclude)
    if not hits or budget <= 0:
        return None
    return _fill("Cairn memories that may be relevant to this prompt (cite as [mem:ID]):",
                 [memory_line(h.memory) for h in hits], budget)


def cited_ids(text: str | None) -> list[str]:
    """The memory ids an injected text cites as [mem:ID], in order."""
    return _CITED.findall(text or "")
