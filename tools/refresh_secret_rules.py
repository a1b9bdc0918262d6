"""Refresh the vendored secret-detection rule sets in engine/cairn/assets from their upstreams.

    python tools/refresh_secret_rules.py                       # clone both upstreams (git, network)
    python tools/refresh_secret_rules.py --betterleaks DIR --security-utilities DIR   # local clones

DIR may be a work tree or a bare git directory; its HEAD is read. What is copied, byte for byte
(data files and licences only, never code):
- Betterleaks (MIT): config/betterleaks.toml, LICENSE, detect/assets/cl100k_base.tiktoken.gz (the
  BPE vocabulary of its token-efficiency filter), internal/words/words.txt.gz (its word list);
- Microsoft security-utilities (MIT): GeneratedRegexPatterns/HighConfidenceSecurityModels.json, LICENSE.
Also written:
- tests/data/secret-rules/betterleaks-examples.json: the true- and false-positive examples Betterleaks' rule generator
  (cmd/generate/config/rules/*.go) checks each rule against, read out of the Go source as data: string
  literals and their concatenations, utils.GenerateSampleSecret(s) expanded with the templates of
  utils/generate.go, and secrets.NewSecret / NewSecretWithEntropy drawn from their regex with a fixed
  seed (so a refresh with no upstream change writes the same file). An example built any other way is
  left out and counted.
- secret-rules-sources.json: for each vendored file, its upstream, commit, commit date and sha256.
Then run tests/engine/test_secret_rules.py: it fails if a rule no longer compiles or an example is
no longer detected as upstream says.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "engine" / "cairn" / "assets"
# Test data, not shipped: tests/engine/test_secret_rules.py runs each rule on its examples.
EXAMPLES = ROOT / "tests" / "data" / "secret-rules" / "betterleaks-examples.json"
UPSTREAMS = {
    "betterleaks": ("https://github.com/betterleaks/betterleaks", {
        "config/betterleaks.toml": "betterleaks.toml",
        "LICENSE": "betterleaks-LICENSE",
        "detect/assets/cl100k_base.tiktoken.gz": "cl100k_base.tiktoken.gz",
        "internal/words/words.txt.gz": "words.txt.gz",
    }),
    "security-utilities": ("https://github.com/microsoft/security-utilities", {
        "GeneratedRegexPatterns/HighConfidenceSecurityModels.json": "microsoft-high-confidence.json",
        "LICENSE": "microsoft-security-utilities-LICENSE",
    }),
}
RULES_DIR = "cmd/generate/config/rules"


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "--git-dir", str(_git_dir(repo)), *args], check=True, capture_output=True).stdout


def _git_dir(repo: Path) -> Path:
    return repo / ".git" if (repo / ".git").exists() else repo


# -- Go source as data ------------------------------------------------------------------------------------
_GO_TOKEN = re.compile(r"""(?P<space>\s+)|(?P<comment>//[^\n]*|/\*.*?\*/)|(?P<raw>`[^`]*`)|(?P<str>"(?:[^"\\\n]|\\.)*")
    |(?P<name>[A-Za-z_][\w.]*)|(?P<num>\d+(?:\.\d+)?)|(?P<op>:=|\.\.\.|[-+*/=(){}\[\],;:!<>&|.])""", re.X | re.S)


def _tokens(source: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(source):
        m = _GO_TOKEN.match(source, pos)
        if not m:
            pos += 1
            continue
        pos = m.end()
        if m.lastgroup not in ("space", "comment"):
            out.append((m.lastgroup or "", m.group(0)))
    return out


def _go_unquote(literal: str) -> str:
    return json.loads(literal.replace("\\x60", "`").replace("\\'", "'")) if "\\x" not in literal.replace(
        "\\x60", "") else literal[1:-1].encode().decode("unicode_escape")


class Unsupported(Exception):
    """An example built some other way than this reader understands."""


class GoExamples:
    """Evaluates the expressions of one rule function that build its tps / fps lists."""

    def __init__(self, templates: dict[str, str], rng: random.Random):
        self.templates, self.rng = templates, rng

    def parse_args(self, toks, i):
        """The argument expressions of a call whose "(" is at toks[i]; returns (args, index after ")")."""
        args, depth, start = [], 0, i + 1
        j = i
        while j < len(toks):
            t = toks[j][1]
            if t in "([{":
                depth += 1
            elif t in ")]}":
                depth -= 1
                if depth == 0:
                    if j > start:
                        args.append(toks[start:j])
                    return args, j + 1
            elif t == "," and depth == 1:
                args.append(toks[start:j])
                start = j + 1
            j += 1
        raise Unsupported("unclosed call")

    def strings(self, args: list) -> list[str]:
        """The values of `args` flattened into one list of strings; one it cannot evaluate is counted
        in `skipped` and left out."""
        out: list[str] = []
        for a in args:
            try:
                v = self.value(a)
            except Unsupported:
                self.skipped += 1
                continue
            out += v if isinstance(v, list) else [v]
        return out

    def value(self, toks):
        """A string or a list of strings for an expression."""
        if toks and toks[-1][1] == "...":
            toks = toks[:-1]
        parts, i = [], 0
        while i < len(toks):
            kind, text = toks[i]
            if kind in ("raw", "str"):
                parts.append(text[1:-1] if kind == "raw" else _go_unquote(text))
                i += 1
            elif kind == "name" and i + 1 < len(toks) and toks[i + 1][1] == "(":
                args, i = self.parse_args(toks, i + 1)
                parts.append(self.call(text, args))
            elif text == "[" and i + 2 < len(toks) and toks[i + 1][1] == "]" and toks[i + 2][1] == "string":
                args, i = self.parse_args(toks, i + 3)
                parts.append(self.strings(args))
            elif text == "+":
                i += 1
            else:
                raise Unsupported(text)
        if len(parts) == 1:
            return parts[0]
        if any(isinstance(p, list) for p in parts):
            raise Unsupported("list concatenation")
        return "".join(parts)

    skipped = 0

    def call(self, name, args):
        vals = lambda: [self.value(a) for a in args]  # noqa: E731
        short = name.rsplit(".", 1)[-1]
        if short == "GenerateSampleSecrets":
            ident, secret = vals()
            return [t.replace("{i}", ident).replace("{I}", ident.upper()).replace("{s}", secret)
                    for t in self.templates.values()]
        if short == "GenerateSampleSecret":
            ident, secret = vals()
            return f'{ident}_api_token = "{secret}"'
        if short == "NewSecret":
            return self.draw(self.value(args[0]))
        if short == "newPlausibleSecret":  # upstream redraws until the secret holds a digit 1-9
            pattern = self.value(args[0])
            for _ in range(50):
                s = self.draw(pattern)
                if re.search("[1-9]", s):
                    return s
            raise Unsupported("no digit")
        if short == "NewSecretWithEntropy":
            if len(args[1]) != 1 or args[1][0][0] != "num":
                raise Unsupported("entropy floor")
            from_regex, floor = self.value(args[0]), float(args[1][0][1])
            for _ in range(50):
                s = self.draw(from_regex)
                if _entropy(s) >= floor:
                    return s
            raise Unsupported("entropy")
        helpers = {"Numeric": "[0-9]{%s}", "Hex": "[a-f0-9]{%s}", "AlphaNumeric": "[a-z0-9]{%s}",
                   "AlphaNumericExtendedShort": "[a-z0-9_-]{%s}", "AlphaNumericExtended": r"[a-z0-9=_\-]{%s}",
                   "AlphaNumericExtendedLong": r"[a-z0-9\/=_\+\-]{%s}"}
        if short in helpers:
            return helpers[short] % self.value(args[0])
        if short == "Hex8_4_4_4_12":
            return "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        if short == "append":
            return self.strings(args[1:])
        raise Unsupported(name)

    def draw(self, pattern: str) -> str:
        """A random string matching `pattern` (reggen's job upstream): classes, literals, groups,
        alternatives and repeats; an unbounded repeat draws up to 10 more."""
        import re._parser as sre  # the stdlib's regex parser, as data

        try:
            tree = sre.parse(pattern.replace("(?i)", ""))
        except re.error as exc:
            raise Unsupported(str(exc)) from None
        return self._gen(tree)

    def _gen(self, tree) -> str:
        import re._constants as c

        out = []
        for op, av in tree:
            if op == c.LITERAL:
                out.append(chr(av))
            elif op == c.IN:
                chars = []
                for iop, iav in av:
                    if iop == c.LITERAL:
                        chars.append(chr(iav))
                    elif iop == c.RANGE:
                        chars += [chr(x) for x in range(iav[0], iav[1] + 1)]
                    elif iop == c.CATEGORY:
                        word = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
                        chars += list({c.CATEGORY_DIGIT: "0123456789", c.CATEGORY_WORD: word,
                                       c.CATEGORY_SPACE: " "}.get(iav, ""))
                    elif iop == c.NEGATE:
                        raise Unsupported("negated class")
                    elif iop == c.CATEGORY and iav == c.CATEGORY_NOT_DIGIT:
                        raise Unsupported("class")
                if not chars:
                    raise Unsupported("empty class")
                out.append(self.rng.choice(chars))
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT):
                low, high, sub = av
                high = low + 10 if high == c.MAXREPEAT else high
                out += [self._gen(sub) for _ in range(self.rng.randint(low, high))]
            elif op == c.SUBPATTERN:
                out.append(self._gen(av[-1]))
            elif op == c.BRANCH:
                out.append(self._gen(self.rng.choice(av[1])))
            elif op == c.ANY:
                out.append(self.rng.choice("abcdefghijklmnopqrstuvwxyz0123456789"))
            elif op in (c.AT,):
                continue
            else:
                raise Unsupported(str(op))
        return "".join(out)


def _entropy(text: str) -> float:
    import math
    from collections import Counter

    return -sum(n / len(text) * math.log2(n / len(text)) for n in Counter(text).values()) if text else 0.0


def sample_templates(source: str) -> dict[str, str]:
    """GenerateSampleSecrets' templates, from utils/generate.go: "name": "template" rows not commented out."""
    body = source[source.index("func GenerateSampleSecrets"):]
    body = body[:body.index("replacer :=")]
    out = {}
    for kind, text in _pairs(_tokens(body)):
        out[kind] = text
    return out


def _pairs(toks):
    for i in range(len(toks) - 2):
        if toks[i][0] in ("str", "raw") and toks[i + 1][1] == ":" and toks[i + 2][0] in ("str", "raw"):
            key = _go_unquote(toks[i][1]) if toks[i][0] == "str" else toks[i][1][1:-1]
            val = _go_unquote(toks[i + 2][1]) if toks[i + 2][0] == "str" else toks[i + 2][1][1:-1]
            yield key, val


def extract_examples(repo: Path) -> tuple[dict[str, dict[str, list[str]]], int]:
    """({rule id: {"tps": [...], "fps": [...]}}, number of examples left out)."""
    templates = sample_templates(git(repo, "show", "HEAD:cmd/generate/config/utils/generate.go").decode())
    names = git(repo, "ls-tree", "--name-only", f"HEAD:{RULES_DIR}").decode().split()
    examples: dict[str, dict[str, list[str]]] = {}
    skipped = 0
    for name in sorted(n for n in names if n.endswith(".go") and not n.endswith("_test.go")):
        source = git(repo, "show", f"HEAD:{RULES_DIR}/{name}").decode()
        for func in re.split(r"\nfunc ", source)[1:]:
            rule = re.search(r'RuleID:\s*"([^"]+)"', func)
            call = re.search(r"utils\.Validate(?:WithPaths)?\(\s*\w+\s*,\s*(\w+)\s*,\s*(\w+)", func)
            if not rule or not call:
                continue
            reader = GoExamples(templates, random.Random(f"{rule.group(1)}"))
            found: dict[str, list[str]] = {"tps": [], "fps": []}
            for key, var in (("tps", call.group(1)), ("fps", call.group(2))):
                if var == "nil":
                    continue
                for m in re.finditer(rf"(?<![\w.]){var}\s*:?=\s*", func):
                    try:
                        value = reader.value(_tokens(func[m.end():statement_end(func, m.end())]))
                    except Unsupported:
                        reader.skipped += 1
                        continue
                    found[key] += value if isinstance(value, list) else [value]
            skipped += reader.skipped
            if found["tps"] or found["fps"]:
                examples[rule.group(1)] = found
    return examples, skipped


def statement_end(source: str, i: int) -> int:
    """Where the Go statement starting at source[i] ends: a newline outside brackets, strings and
    comments, not after an operator that continues it."""
    depth, last = 0, ""
    while i < len(source):
        c = source[i]
        if c == "`":
            i = source.index("`", i + 1) + 1
            last = "`"
            continue
        if c == '"':
            m = re.compile(r'"(?:[^"\\\n]|\\.)*"').match(source, i)
            i = m.end() if m else i + 1
            last = '"'
            continue
        if source.startswith("//", i):
            i = source.find("\n", i)
            i = len(source) if i < 0 else i
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth < 0:
                return i
        elif c == "\n" and depth == 0 and last not in ("+", ",", "(", "{", "="):
            return i
        if not c.isspace():
            last = c
        i += 1
    return i


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--betterleaks", type=Path, help="A local clone of Betterleaks (default: clone it).")
    parser.add_argument("--security-utilities", type=Path, help="A local clone of microsoft/security-utilities.")
    args = parser.parse_args()
    sources = {}
    with tempfile.TemporaryDirectory() as tmp:
        for key, (url, files) in UPSTREAMS.items():
            repo = getattr(args, key.replace("-", "_"))
            if repo is None:
                repo = Path(tmp) / key
                subprocess.run(["git", "clone", "--quiet", "--depth", "1", url, str(repo)], check=True)
            commit = git(repo, "rev-parse", "HEAD").decode().strip()
            date = git(repo, "log", "-1", "--format=%cs", "HEAD").decode().strip()
            EXAMPLES.parent.mkdir(parents=True, exist_ok=True)
            for upstream, local in files.items():
                (ASSETS / local).write_bytes(git(repo, "show", f"HEAD:{upstream}"))
                sources[local] = {"upstream": url, "path": upstream, "commit": commit, "date": date,
                                  "sha256": sha256(ASSETS / local)}
            if key == "betterleaks":
                examples, skipped = extract_examples(repo)
                out = EXAMPLES
                out.write_text(json.dumps(examples, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
                sources[str(out.relative_to(ROOT))] = {
                    "upstream": url, "path": f"{RULES_DIR}/*.go (examples read as data)", "commit": commit,
                    "date": date, "sha256": sha256(out)}
                n_tp = sum(len(v["tps"]) for v in examples.values())
                n_fp = sum(len(v["fps"]) for v in examples.values())
                print(f"betterleaks {commit[:12]} ({date}): {len(examples)} rules with examples, "
                      f"{n_tp} true and {n_fp} false positives, {skipped} examples left out", file=sys.stderr)
            else:
                print(f"{key} {commit[:12]} ({date})", file=sys.stderr)
    (ASSETS / "secret-rules-sources.json").write_text(json.dumps(sources, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
