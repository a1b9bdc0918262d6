"""What Cairn injects into Claude's context: the session brief and the memories relevant to a prompt.

Both are plain factual text (hooks#add-context-for-claude: text phrased as commands can trip
prompt-injection defences), bounded in characters, and cite each memory as [mem:ID] with its date so
Claude can recall, replace or forget it.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .embedder import EQUIVALENT_WEIGHTS
from .errors import CairnError
from .memories.ranking import bm25_idf, stem_frequencies
from .memories.render import context_line as memory_line
from .memories.render import shorten
from .memories.scope_index import ScopeMatch
from .models import Hit, Memory, Order
from .stores.paths import GLOBAL_STORE
from .text import CJK_CHARS, content_words, stems
from .text import stem_text as _stem_text
from .timeutil import now_ms

if TYPE_CHECKING:
    import numpy as np

    from .api import Cairn
    from .embedder import Embedder

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

# Session brief: an index of the store, one line per memory, grouped by kind in this order.
BRIEF_SECTIONS = (("decision", "Decisions"), ("convention", "Conventions"), ("preference", "Preferences"),
                  ("task", "Open tasks"), ("fact", "Facts"), ("insight", "Insights"))
SECTION_TITLES = dict(BRIEF_SECTIONS)
OTHER_TITLE = "Other"  # the section of a kind BRIEF_SECTIONS does not name
BRIEF_KINDS = ("decision", "convention", "preference")  # what the global store contributes
FOCUS_BONUS = 1.5  # a memory the session's signals point at (session_brief's focus) lists before any other
# The default budget, hooks.brief_chars: about 4,000 tokens (~4 characters a token for English prose
# and code names), 2% of a 200k-token context window, delivered by two SessionStart hooks (a hook
# output over 10,000 characters is replaced by a file path). At ~110 characters a line it lists a
# store of 130-150 memories whole; past that, tool time brings the scoped ones. Chosen on the dev
# sets against 8,000 and two outputs' most (docs/benchmarks.md, "The brief's budget").
BRIEF_CHARS = 16000
BRIEF_MEMORY_CHARS = 200  # the longest gist: memory_recall gives the whole text
MIN_GIST_CHARS = 60  # shorter than this, a line stops saying what the memory is: list fewer, map the rest
LISTED_GIST_CHARS = 90  # the gist when not every memory fits
WHOLE_IMPORTANCE = 4  # a rule this important is listed whole even when not every memory fits
ALL_LIMIT = 2000  # a store of at most this many current memories is ranked whole; a larger one by candidates
MAP_TAGS = 8  # tags named in the brief's map of the store
MAP_TOPICS = 10  # frequent words of the memories left out, named as topics
# Priority of a memory for the brief (`brief_priority`): kind first (conventions and decisions are
# what an agent gets wrong without being told), then importance, then what Claude cited, less for
# what it was shown often and never cited, and a little for recency.
KIND_PRIORITY = {"decision": 1.0, "convention": 1.0, "preference": 0.9, "task": 0.8, "fact": 0.5, "insight": 0.4}
IMPORTANCE_STEP = 0.25  # per importance point away from 3
CITED_BONUS = 1.0  # a memory Claude cited after it was injected: listed before any never-cited one of its kind
IGNORED_AFTER = 5  # injections without a citation before a memory counts as ignored
IGNORED_PENALTY = 0.3
RECENCY_BONUS = 0.2
RECENCY_HALF_LIFE_DAYS = 30.0
# The user's global store (preferences that hold in every project) gets its own section of the
# brief, at most 1/GLOBAL_SHARE of the budget: the project's own memories come first.
GLOBAL_SHARE = 4
GLOBAL_TITLE = "Yours, in every project (global store)"


def is_trivial(prompt: str) -> bool:
    """Slash commands, acknowledgements, and prompts without a single content word."""
    return _is_trivial(prompt)


@lru_cache(maxsize=8)
def _is_trivial(prompt: str) -> bool:
    # Cached: a hook asks before its other work, and relevant_hits asks again for the same prompt.
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


def brief_priority(m: Memory, use: dict | None, now: int) -> float:
    """How much `m` belongs in a brief that cannot list everything (constants above): kind, importance
    (1-5), citations (`use`: Cairn.usage_of's counts, None when never injected), ignored injections,
    and recency of valid_from. Higher first; the figure has no unit, only its order matters."""
    p = KIND_PRIORITY.get(m.kind, 0.5) + IMPORTANCE_STEP * (m.importance - 3)
    cited = int((use or {}).get("cited") or 0)
    injected = int((use or {}).get("injected") or 0)
    if cited:
        p += CITED_BONUS + 0.25 * math.log2(cited)
    elif injected >= IGNORED_AFTER:
        p -= IGNORED_PENALTY
    age_days = max(0.0, (now - m.valid_from) / 86_400_000)
    return p + RECENCY_BONUS * 0.5 ** (age_days / RECENCY_HALF_LIFE_DAYS)


def _brief_candidates(memory: Cairn, current: int, budget: int) -> list[Memory]:
    """The project store's current memories, all of them up to ALL_LIMIT; in a larger store, those
    that can rank high, as many of each as the budget could list: the most important, the newest,
    and the most cited."""
    if current <= ALL_LIMIT:
        return memory.list(limit=ALL_LIMIT, scope="project")
    most = budget // (MIN_GIST_CHARS // 2) + 1  # more than fit: a line is longer than half a gist
    pool = {m.id: m for m in memory.list(limit=most, scope="project", order=Order.IMPORTANCE)}
    for m in memory.list(limit=most, scope="project"):
        pool.setdefault(m.id, m)
    cited = memory.get_many(i for i in memory.most_cited(most) if i not in pool)
    pool.update({i: m for i, m in cited.items() if m.status == "current" and m.cold_at is None})
    return list(pool.values())


def _gist_line(m: Memory, limit: int, with_kind: bool = False) -> str:
    kind = f" {m.kind}:" if with_kind else ""
    return f"- [mem:{m.id}]{kind} {shorten(m.text or '', limit)}"


def _listed_line(m: Memory, gist: int, whole: bool = True) -> str:
    """A listed memory's line under its kind's section; under "Other:", it names its kind. A
    decision, convention or preference of at most BRIEF_MEMORY_CHARS is listed whole with `whole`,
    and an important one (importance >= WHOLE_IMPORTANCE) always: a rule cut short can say the
    opposite of what it says ("never restart the…")."""
    whole = ((whole or m.importance >= WHOLE_IMPORTANCE) and m.kind in BRIEF_KINDS
             and len(m.text or "") <= BRIEF_MEMORY_CHARS)
    return _gist_line(m, max(gist, len(m.text or "")) if whole else gist, with_kind=m.kind not in SECTION_TITLES)


def _section(kind: str) -> str:
    return SECTION_TITLES.get(kind, OTHER_TITLE)


def session_brief(memory: Cairn, *, budget: int = BRIEF_CHARS, global_only: bool = False,
                  exclude: Collection[str] = (), focus: Mapping[str, float] | None = None,
                  counts: Mapping[str, int] | None = None) -> str | None:
    """The session brief: an index of the project store within `budget` characters.

    Every current memory as one line (`- [mem:ID] gist`, grouped by kind) when they fit, the gists
    shortened down to MIN_GIST_CHARS so that they do; otherwise the memories of highest
    `brief_priority` (kind, importance, what Claude cited, recency) and a map of the rest: counts per
    kind and the topics (tags, else frequent words) with the memory_recall query that finds them.
    Then the user's own decisions, conventions and preferences from the global store, in at most
    1/GLOBAL_SHARE of the budget.
    global_only: `memory` is opened on the global store in place of a project that has no store yet;
    the brief is then the global store's decisions, conventions and preferences, in the whole budget.
    exclude: ids never listed (memories whose text the session already holds, e.g. from CLAUDE.md).
    focus: {memory id: 0..1} from the session's own signals (the files changed in the work tree, the
    branch, on resume the files the session touched): added to the priority, times FOCUS_BONUS,
    so that a brief that cannot list everything lists what this session is likely about first.
    counts: memory.counts(), when the caller has them already (one scan of the store fewer).
    None when no store has a current memory or nothing fits."""
    on_global = memory.name == GLOBAL_STORE  # also when CAIRN_STORE names it: no section of its own
    counts = memory.counts() if counts is None else counts
    global_important = [] if on_global else _global_important(memory, budget // 40 + 1)
    if (counts["current"] == 0 and not global_important) or budget <= 0:
        return None
    excluded = frozenset(exclude)
    pool = _brief_pool(memory, counts["current"], budget, excluded, focus, global_only=global_only)
    now = now_ms()
    use = memory.usage_of([m.id for m in pool]) if pool else {}
    bonus = focus or {}
    pool.sort(key=lambda m: (-(brief_priority(m, use.get(m.id), now) + FOCUS_BONUS * bonus.get(m.id, 0.0)), m.id))
    total = len(pool) if counts["current"] <= ALL_LIMIT or global_only else counts["current"] - len(excluded)
    header = _brief_header(memory, counts["current"], total, global_only=global_only)
    global_budget = 0 if global_only or not global_important else budget // GLOBAL_SHARE
    global_lines = _fit_lines([_gist_line(m, LISTED_GIST_CHARS, with_kind=True) for m in global_important],
                              global_budget - 2 - len(GLOBAL_TITLE))
    global_chars = len(GLOBAL_TITLE) + 2 + sum(len(x) + 1 for x in global_lines) if global_lines else 0
    chosen = _choose(pool, budget - len(header) - 1 - global_chars)
    footer = ""
    if len(chosen[0]) < total:
        header = header.replace(", listed here", "; {n} listed here, the rest mapped on the line 'Not listed: ...'")
        room = budget - len(header) - 1 - global_chars
        footer = _fit_map(memory, pool, chosen, total, counts["current"], room)
        header = header.replace("{n}", str(len(chosen[0])))
    return _brief_text(header, chosen, global_lines, footer)


def _brief_pool(memory: Cairn, current: int, budget: int, excluded: frozenset[str],
                focus: Mapping[str, float] | None, *, global_only: bool) -> list[Memory]:
    """The memories a brief may list, `excluded` left out: the global store's decisions, conventions
    and preferences (global_only), else the brief's candidates (_brief_candidates) and, in a store
    too large to list whole (`current` over ALL_LIMIT), the current warm memories of `focus`."""
    if global_only:
        return [m for m in memory.list(kinds=list(BRIEF_KINDS), limit=budget // 40 + 1, scope="project",
                                       order=Order.IMPORTANCE) if m.id not in excluded]
    pool = [m for m in _brief_candidates(memory, current, budget) if m.id not in excluded]
    if focus and current > ALL_LIMIT:  # a large store's candidates: the focus's too
        have = {m.id for m in pool}
        held = memory.get_many(i for i in focus if i not in have and i not in excluded)
        pool += [m for i in focus if (m := held.get(i)) is not None and m.status == "current" and m.cold_at is None]
    return pool


def _brief_header(memory: Cairn, current: int, total: int, *, global_only: bool) -> str:
    """The brief's first line: which store, how many current memories (`current` in the global store
    for global_only, else `total`), and how to cite and find more."""
    if global_only:
        return (f"Cairn memory: this project has no store yet; your global store holds "
                f"{current} current memories that hold in every project. "
                "Cite as [mem:ID]; the memory_recall tool gives whole texts and finds more.")
    return (f"Cairn project memory, store {memory.name}: {_count(total, 'current memory', 'current memories')}"
            f"{', listed here' if total else ''}. Cite as [mem:ID]; the memory_recall tool gives "
            "whole texts and finds more.")


def _fit_map(memory: Cairn, pool: list[Memory], chosen: tuple[list[Memory], int, bool], total: int,
             current: int, room: int) -> str:
    """The line 'Not listed: ...' that maps the `total` less the listed memories (chosen: _choose's
    listing of `pool`), dropping the least of the listed lines until the listing and the map fit
    `room` characters: the map of the rest is worth more than the least of the listed lines."""
    listed, gist, whole = chosen
    store_topics = memory.topics(tags=MAP_TAGS) if current > ALL_LIMIT else None  # one query
    scoped = memory.scopes.count_scoped()
    while True:
        if store_topics is not None:  # the rest is not loaded: the store's counts less the listed
            named, kinds = list(store_topics["tags"]), dict(store_topics["kinds"])
            for m in listed:
                kinds[m.kind] = max(0, kinds.get(m.kind, 0) - 1)
        else:
            shown = {m.id for m in listed}
            named, kinds = _rest_topics([m for m in pool if m.id not in shown])
        footer = _rest_line(total - len(listed), kinds, named, scoped)
        if not listed or _listing_chars(listed, gist, whole) + 1 + len(footer) <= room:
            return footer
        listed.pop()


def _brief_text(header: str, chosen: tuple[list[Memory], int, bool], global_lines: list[str],
                footer: str) -> str | None:
    """The brief's lines: the header, the listed memories by section, the global store's, the map;
    None when nothing is listed."""
    listed, gist, whole = chosen
    lines = [header]
    for title in dict.fromkeys([*SECTION_TITLES.values(), OTHER_TITLE]):
        items = [_listed_line(m, gist, whole) for m in listed if _section(m.kind) == title]
        if items:
            lines += [f"{title}:", *items]
    if global_lines:
        lines += [f"{GLOBAL_TITLE}:", *global_lines]
    if len(lines) == 1:
        return None
    if footer:
        lines.append(footer)
    return "\n".join(lines)


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _fit_lines(lines: list[str], budget: int) -> list[str]:
    out, used = [], 0
    for line in lines:
        if used + len(line) + 1 > budget:
            break
        out.append(line)
        used += len(line) + 1
    return out


def _listing_chars(listed: list[Memory], gist: int, whole: bool = True) -> int:
    """Characters of the kind sections listing `listed` with gists cut at `gist` (rules whole
    with `whole`, _listed_line)."""
    titles = sum(len(t) + 2 for t in {_section(m.kind) for m in listed})
    return titles + sum(len(_listed_line(m, gist, whole)) + 1 for m in listed)


def _choose(pool: list[Memory], budget: int) -> tuple[list[Memory], int, bool]:
    """(the memories to list, in priority order, the gist length, whether rules are listed whole):
    all of them at the longest gist that fits (down to MIN_GIST_CHARS), rules whole when that
    still fits, else cut like any gist (an index of the whole store is worth more than whole
    rules: memory_recall gives the text); else the first ones that fit at LISTED_GIST_CHARS, rules
    cut too but for important ones (whole rules list fewer memories: measured on the per-prompt set
    with 200 others, 0.53 against 0.83 in context, docs/benchmarks.md)."""
    if not pool or budget <= 0:
        return [], LISTED_GIST_CHARS, True
    for whole in (True, False):
        low, high = MIN_GIST_CHARS, BRIEF_MEMORY_CHARS
        if _listing_chars(pool, low, whole) > budget:
            continue
        while low < high:  # the longest gist at which every memory fits
            mid = (low + high + 1) // 2
            if _listing_chars(pool, mid, whole) <= budget:
                low = mid
            else:
                high = mid - 1
        return list(pool), low, whole
    listed: list[Memory] = []
    used, sections = 0, set()
    for m in pool:  # _listing_chars, kept up as lines are added
        title = _section(m.kind)
        cost = len(_listed_line(m, LISTED_GIST_CHARS, False)) + 1 + (0 if title in sections else len(title) + 2)
        if used + cost > budget:
            break
        listed.append(m)
        used += cost
        sections.add(title)
    return listed, LISTED_GIST_CHARS, False


def _rest_topics(rest: list[Memory]) -> tuple[list[tuple[str, int]], dict[str, int]]:
    """The topics of the memories not listed (tags when they have some, else their most frequent
    content words), each with a count, and how many of each kind they are."""
    kinds = Counter(m.kind for m in rest)
    named = Counter(t for m in rest for t in m.tags).most_common(MAP_TAGS)
    if len(named) < 3:
        words = Counter(w for m in rest for w in {w.casefold() for w in content_words(m.text or "")
                                                  if len(w) > 2 and not w.isdigit()})
        common = max(2, 0.6 * len(rest))  # a word in most of them names no topic
        taken = {t for t, _ in named}
        named += [(w, c) for w, c in words.most_common() if 1 < c <= common and w not in taken][
            :MAP_TOPICS - len(named)]
    return named, dict(kinds)


def _rest_line(n_rest: int, kinds: dict[str, int], named: list[tuple[str, int]], scoped: int = 0) -> str:
    """One line on the memories not listed: how many of each kind, and their topics with the query
    that finds them; and, when the store has memories scoped to files (`scoped`), that those come by
    themselves when the work touches their files."""
    by_kind = ", ".join(_count(n, kind, kind + "s")
                        for kind, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])) if n)
    line = f"Not listed: {n_rest} more ({by_kind})"
    if named:
        line += "; topics: " + ", ".join(f"{t} {c}" for t, c in named)
        line += f'. memory_recall "{named[0][0]}" (or any topic) finds them'
    if scoped:
        line += (f". {_count(scoped, 'memory is', 'memories are')} scoped to files or commands: each comes "
                 "by itself when a tool call touches them")
    return line + "."


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
    total, df = stem_frequencies(memory.term_counts, list(dict.fromkeys(content_words(prompt))))
    idf = {stem: bm25_idf(total, n) for stem, n in df.items()}
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


def _default_gate() -> CosineGate:
    """all-MiniLM-L6-v2's gate, which cosine_gate always has."""
    gate = cosine_gate(GATE_MODEL)
    assert gate is not None
    return gate


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
    gate = gate or _default_gate()
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
    gate = gate or _default_gate()
    return cosine is None or cosine >= gate.rare_floor


def _cosines(memory: Cairn, hits: list[Hit], query_vector: np.ndarray) -> dict[str, float]:
    """Cosines of the hits, including those only BM25 found: a memory outside the vector candidates
    has a low cosine, not an unknown one, and must not be judged by its words alone. Memories
    without a vector (awaiting embedding) are left out."""
    out = {h.memory.id: c for h in hits
           if (c := h.reasons.get("vector", {}).get("cosine", h.reasons.get("evidence", {}).get("cosine")))
           is not None}
    missing = [h.memory.id for h in hits if h.memory.id not in out]
    if missing:
        out.update(memory.cosines(missing, query_vector))
    return out


def _gate_for(embedder: Embedder | None) -> CosineGate | None:
    """The cosine gate for an embedder: all-MiniLM-L6-v2's for its weights under any name or backend
    (`_calibrated`), another model's by its name; None for a model without one, or for weights other
    than the fitted ones under the default model's name."""
    if embedder is None:
        return None
    if _calibrated(embedder):
        return cosine_gate(GATE_MODEL)
    return None if embedder.model_name == GATE_MODEL else cosine_gate(embedder.model_name)


def _calibrated(embedder: Embedder | None) -> bool:
    """Whether the gate's cosine thresholds fit this embedder's vectors: all-MiniLM-L6-v2's weights
    (either backend, or a copy under another name), or, while the weights are not known, its name."""
    if embedder is None:
        return False
    if embedder.weights:
        return embedder.weights in EQUIVALENT_WEIGHTS[GATE_MODEL]
    return embedder.model_name == GATE_MODEL


def relevant_hits(memory: Cairn, prompt: str, *, k: int = 5, query_vector: np.ndarray | None = None,
                  embed: Callable[[str], Any] | None = None, exclude: Collection[str] = ()) -> list[Hit]:
    """Up to k current memories that pass the relevance gate, in recall order; [] for trivial prompts.

    query_vector: the prompt's vector (hybrid), or None for keyword-only recall; ignored for a model
    the gate has no thresholds for (cosine_gate), and for a CJK prompt (is_cjk) with a model that
    does not cover CJK. embed: instead of query_vector, a function that gives the vector of the
    prompt's first MAX_PROMPT_CHARS characters (or None), called only when the gate reads cosines
    for this prompt (not for a trivial one, nor in the cases above). exclude: ids never returned
    (memories already in the session's context), left out before the k cut."""
    if k <= 0 or is_trivial(prompt):
        return []
    text = prompt[:MAX_PROMPT_CHARS]
    words = stems(text)
    gate = _gate_for(memory.embedder)
    cjk = is_cjk(text)
    if gate is None or (not gate.multilingual and cjk):
        query_vector = None  # no thresholds for this model's cosines, or not on this language
    elif query_vector is None and embed is not None:
        query_vector = embed(text)
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
        return _by_use(memory, [h for h in hits if h.memory.id not in exclude
                                and relevant(h, h.reasons.get("vector", {}).get("cosine"))])[:k]
    hits = memory.recall(text, k=max(k * 3, HYBRID_DEPTH) + len(exclude), query_vector=query_vector, scope="project")
    hits = [h for h in hits if h.memory.id not in exclude]
    cosines = _cosines(memory, hits, query_vector)
    return _by_use(memory, [h for h in hits if relevant(h, cosines.get(h.memory.id))])[:k]


# Learning from use in per-prompt recall: among the memories that pass the gate, one Claude cited
# after an injection counts CITED_BOOST more, one injected IGNORED_AFTER times and never cited
# IGNORED_DAMPING less (a memory Claude keeps being shown and never uses gives way to the others).
CITED_BOOST = 0.2
IGNORED_DAMPING = 0.2


def _by_use(memory: Cairn, hits: list[Hit]) -> list[Hit]:
    """`hits` reordered by score weighed with their usage counts (one lookup; stable on ties)."""
    if len(hits) < 2:
        return hits
    use = memory.usage_of([h.memory.id for h in hits])

    def weight(h: Hit) -> float:
        counts = use.get(h.memory.id) or {}
        if counts.get("cited"):
            return 1.0 + CITED_BOOST
        if (counts.get("injected") or 0) >= IGNORED_AFTER:
            return 1.0 - IGNORED_DAMPING
        return 1.0

    return sorted(hits, key=lambda h: -h.score * weight(h))


def prompt_context(memory: Cairn, prompt: str, *, k: int = 5, budget: int = 1200,
                   query_vector: np.ndarray | None = None,
                   embed: Callable[[str], Any] | None = None, exclude: Collection[str] = ()) -> str | None:
    """The memories relevant to `prompt`, formatted within `budget` characters; None when none is.
    query_vector or embed (the prompt's vector, or how to get it when needed) and exclude (ids
    already in the session's context): see relevant_hits."""
    hits = relevant_hits(memory, prompt, k=k, query_vector=query_vector, embed=embed, exclude=exclude)
    if not hits or budget <= 0:
        return None
    return _fill("Cairn memories that may be relevant to this prompt (cite as [mem:ID]):",
                 [memory_line(h.memory) for h in hits], budget)


# Tool time: the memories scoped to what a tool call touches (scopes.py). A given or imported scope
# is the writer's own statement that the memory governs those paths: it is injected whenever it
# matches. A learned one is evidence, weighed: it is injected when specificity x weight reaches
# TOOL_MIN_SCORE (its folder's siblings at FOLDER_WEIGHT 0.8 pass, files of the same type under a
# common ancestor at 0.6 pass only close to them). Calibrated on the work set's dev split
# (bench/work_eval.py; docs/benchmarks.md, "Memory that follows the work").
TOOL_MIN_SCORE = 0.5
TOOL_K = 5  # hooks.tool_k's default


def _applies(match: ScopeMatch, min_score: float | None = None) -> bool:
    """Whether a scope match is enough to bring its memory: a given scope always, a learned one from
    `min_score` (default TOOL_MIN_SCORE)."""
    return match.origin == "given" or match.score >= (TOOL_MIN_SCORE if min_score is None else min_score)


def tool_context(memory: Cairn, targets: Collection[str], *, exclude: Collection[str] = (), k: int = TOOL_K,
                 budget: int = 1200, min_score: float | None = None) -> str | None:
    """The memories scoped to `targets` (relative paths, folders ending in "/", "cmd:..." commands)
    not in `exclude`, at most k, formatted within `budget` characters; None when none applies.
    Given scopes first, then learned ones by score; ties by brief_priority. min_score: the least
    score of a learned match (default TOOL_MIN_SCORE)."""
    if k <= 0 or budget <= 0 or not targets:
        return None
    found = [(m, s) for m, s in memory.scopes.matching(list(targets), exclude=exclude, limit=k * 4)
             if _applies(s, min_score)]
    if not found:
        return None
    now = now_ms()
    use = memory.usage_of([m.id for m, _ in found])
    found.sort(key=lambda ms: (ms[1].origin != "given", -round(ms[1].score, 2),
                               -brief_priority(ms[0], use.get(ms[0].id), now), ms[0].id))
    shown = sorted({s.target.removeprefix("cmd:") for _, s in found[:k]})
    header = f"Cairn memories for {', '.join(shown[:3])}{' ...' if len(shown) > 3 else ''} (cite as [mem:ID]):"
    return _fill(header, [memory_line(m) for m, _ in found[:k]], budget)


def subagent_context(memory: Cairn, prompt: str, *, named: Collection[str] = (), recent: Collection[str] = (),
                     query_vector: np.ndarray | None = None, k: int = 5, budget: int = 1500) -> str | None:
    """What a subagent gets at its start for its task `prompt`: the memories scoped to the files the
    prompt names (`named`), the memories the per-prompt gate passes for the prompt, and those scoped
    to the parent's recent files (`recent`) that share a content word with the prompt (the parent's
    files tell what the work is about only when the task is about them too). At most k, within
    `budget` characters; None when none applies. Never the store's index."""
    if k <= 0 or budget <= 0 or not prompt.strip():
        return None
    chosen: dict[str, Memory] = {}
    for m, s in memory.scopes.matching(list(named), limit=k * 2) if named else []:
        if _applies(s):
            chosen.setdefault(m.id, m)
    for hit in relevant_hits(memory, prompt, k=k, query_vector=query_vector, exclude=chosen):
        chosen.setdefault(hit.memory.id, hit.memory)
    if recent and len(chosen) < k:
        words = stems(prompt[:MAX_PROMPT_CHARS])
        for m, s in memory.scopes.matching(list(recent), exclude=chosen, limit=k * 2):
            if _applies(s) and words & _stem_text(m.passage):
                chosen.setdefault(m.id, m)
    if not chosen:
        return None
    return _fill("Cairn memories for this task (cite as [mem:ID]; memory_recall finds more):",
                 [memory_line(m) for m in list(chosen.values())[:k]], budget)
