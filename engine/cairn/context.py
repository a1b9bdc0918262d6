"""What Cairn injects into Claude's context: the session brief and the memories relevant to a prompt.

Both are plain factual text (hooks#add-context-for-claude: text phrased as commands can trip
prompt-injection defences), bounded in characters, and cite each memory as [mem:ID] with its date so
Claude can recall, replace or forget it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .models import Hit, Memory
from .text import content_words
from .timeutil import format_date

if TYPE_CHECKING:
    from .engine import Cairn

# Prompts that carry no topic: acknowledgements and continuations. Matched after normalisation.
TRIVIAL_PROMPTS = frozenset({
    "ok", "okay", "k", "kk", "yes", "y", "yep", "yeah", "no", "n", "nope", "sure", "thanks", "thank you",
    "thx", "ty", "continue", "go", "go on", "go ahead", "proceed", "next", "done", "lgtm", "sounds good",
    "do it", "please", "retry", "again", "try again", "keep going", "carry on",
})

# Relevance gate for per-prompt injection, on all-MiniLM-L6-v2 cosine. With this model unrelated
# English sentences score about -0.1..0.25 and topical matches about 0.3..0.8, so a cosine alone
# counts from 0.45, and from 0.25 when a content word (Snowball stem) is shared too.
# Calibrated on tests/data/prompt_relevance.yaml; tests/test_context.py holds the figures.
STRONG_COSINE = 0.45
WEAK_COSINE = 0.25
MAX_MEMORY_CHARS = 300  # one memory's text in an injection, before the "…"

_BRIEF_SECTIONS = (("decision", "Decisions"), ("convention", "Conventions"), ("preference", "Preferences"),
                   ("task", "Open tasks"), ("fact", "Facts"), ("insight", "Insights"))


def is_trivial(prompt: str) -> bool:
    """Slash commands, acknowledgements, and prompts without a single content word."""
    text = prompt.strip()
    if not text or text.startswith("/"):
        return True
    key = re.sub(r"[^\w\s]", "", text.casefold()).strip()
    if key in TRIVIAL_PROMPTS or len(key) < 3:
        return True
    return not content_words(text)


def _shorten(text: str, limit: int = MAX_MEMORY_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def memory_line(memory: Memory, *, with_kind: bool = True) -> str:
    kind = f" {memory.kind}:" if with_kind else ""
    return f"- [mem:{memory.id}] {format_date(memory.valid_from)}{kind} {_shorten(memory.text or '')}"


def _fill(header: str, lines: list[str], budget: int) -> str | None:
    """header + as many whole lines as fit in `budget` characters; None when no line fits."""
    out, used = [header], len(header)
    for line in lines:
        if used + 1 + len(line) > budget:
            continue
        out.append(line)
        used += 1 + len(line)
    return "\n".join(out) if len(out) > 1 else None


def session_brief(memory: Cairn, *, budget: int = 1500, per_section: int = 6, recent: int = 5) -> str | None:
    """The project's most important current decisions, conventions, preferences and open tasks, then
    the most recent memories, within `budget` characters. None when the store is empty."""
    counts = memory.store.counts()
    if counts["current"] == 0 or budget <= 0:
        return None
    header = (f"Cairn project memory ({counts['current']} current memories in store {memory.store.name}). "
              "Cite as [mem:ID]; the memory_recall tool finds more.")
    lines: list[str] = []
    shown: set[str] = set()
    for kind, title in _BRIEF_SECTIONS:
        items = memory.list(kinds=[kind], limit=per_section, order="importance DESC, recorded_at DESC")
        if kind in ("fact", "insight"):
            items = [m for m in items if m.importance >= 4]  # only the important ones up front
        if items:
            lines.append(f"{title}:")
            lines += [memory_line(m, with_kind=False) for m in items]
            shown.update(m.id for m in items)
    latest = [m for m in memory.list(limit=recent + len(shown)) if m.id not in shown][:recent]
    if latest:
        lines.append("Recent:")
        lines += [memory_line(m) for m in latest]
    # Drop section titles left without a line when the budget cut their items.
    text = _fill(header, lines, budget)
    if text is None:
        return None
    kept = text.split("\n")
    cleaned = [l for i, l in enumerate(kept) if not (l.endswith(":") and not l.startswith("- ")
                                                      and (i + 1 == len(kept) or not kept[i + 1].startswith("- ")))]
    return "\n".join(cleaned) if len(cleaned) > 1 else None


def stems(text: str) -> set[str]:
    """Snowball (Porter 2) stems of the content words of `text`: "Deploys" and "deploy" share one."""
    import snowballstemmer

    return set(snowballstemmer.stemmer("english").stemWords(content_words(text)))


def is_relevant(hit: Hit, prompt_stems: set[str]) -> bool:
    """The relevance gate. With a vector: a strong cosine, or a weaker one plus a shared content
    word. Keyword-only: every content word of a one-word prompt, else at least two shared."""
    shared = len(prompt_stems & stems(hit.memory.text or ""))
    cosine = hit.reasons.get("vector", {}).get("cosine")
    if cosine is not None:
        return cosine >= STRONG_COSINE or (cosine >= WEAK_COSINE and shared >= 1)
    return shared >= min(2, len(prompt_stems)) and shared > 0


def relevant_hits(memory: Cairn, prompt: str, *, k: int = 5, query_vector=None) -> list[Hit]:
    """Up to k current memories that pass the relevance gate, best first; [] for trivial prompts."""
    if k <= 0 or is_trivial(prompt):
        return []
    words = stems(prompt[:2000])
    hits = memory.recall(prompt[:2000], k=k * 3, query_vector=query_vector, use_vectors=query_vector is not None)
    return [h for h in hits if is_relevant(h, words)][:k]


def prompt_context(memory: Cairn, prompt: str, *, k: int = 5, budget: int = 1200, query_vector=None) -> str | None:
    """The memories relevant to `prompt`, formatted within `budget` characters; None when none is."""
    hits = relevant_hits(memory, prompt, k=k, query_vector=query_vector)
    if not hits or budget <= 0:
        return None
    return _fill("Cairn memories that may be relevant to this prompt (cite as [mem:ID]):",
                 [memory_line(h.memory) for h in hits], budget)
