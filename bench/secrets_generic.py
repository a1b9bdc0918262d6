"""A cue-free signal for credentials, measured alone: a generated token in a value position.

    python bench/secrets_generic.py

secret_values.generated_token judges a value alone (three character classes, high entropy, not hex,
a UUID, words, base64 of text or DER ...). This script tries it, with no credential word, in three
value positions on every labelled split (tests/data/credentials) and prints, per split and position:
how many secrets it finds alone (a token that is or holds the item's value) and how many innocent
texts it would change. Positions: `option` (a command-line option's value, as secret_positional uses
it: a one-letter option or one named with a fragment of a credential word), `literal` (a quoted
argument inside a call's parentheses), `colon` (the last thing on a line after "name: "). A position
is worth using only where it flags no innocent text.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "engine"))

from cairn.privacy import secret_positional  # noqa: E402
from cairn.privacy.secret_values import generated_token  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "credentials"
SPLITS = ("dev", *sorted(p.stem for p in DATA.glob("*.yaml") if p.stem != "dev"))
POSITIONS = {
    "option": secret_positional._OPTION_VALUE,
    "literal": re.compile(r"""\([^()\n]*?(?<![\w\\])(['"])([A-Za-z0-9+/_.~=-]{16,200})\1"""),
    "colon": re.compile(r"""(?m)(?:^|[^\w/])[\w .'-]{1,40}:\s+['"`]?([A-Za-z0-9+/_.~=-]{16,200})['"`]?\s*$"""),
}


def tokens(text: str, position: str) -> list[str]:
    """The values in `text` at `position` that generated_token accepts (not in a URL, not after an id word)."""
    if position == "option":  # as the scrubber uses it
        return [text[a:b] for line in text.split("\n") for a, b in secret_positional._option_tokens(line)]
    out = []
    for match in POSITIONS[position].finditer(text):
        group = match.lastindex or 0
        value, start = match.group(group).rstrip("."), match.start(group)
        left = max(text.rfind(c, 0, start) for c in " \n(\"'") + 1
        if "://" in text[left:start + len(value)] or "/" in text[left:start]:
            continue
        named = secret_positional._NOT_A_SECRET_OPTION.search(text, max(0, start - 40), start)
        if generated_token(value) and not named:
            out.append(value)
    return out


def main() -> None:
    print("| split | position | secrets found alone | innocent texts flagged |\n|---|---|---|---|")
    for split in SPLITS:
        data = yaml.safe_load((DATA / f"{split}.yaml").read_text())
        for position in POSITIONS:
            found = sum(any(item["value"] in t or t in item["value"] for t in tokens(item["text"], position))
                        for item in data["secret"])
            flagged = sum(bool(tokens(item["text"], position)) for item in data["innocent"])
            print(f"| {split} | {position} | {found} / {len(data['secret'])} | {flagged} / {len(data['innocent'])} |")


if __name__ == "__main__":
    main()
