"""detect-secrets plugins for secrets its own detectors miss (loaded by path; see privacy.py).

Each is a RegexBasedDetector (detect-secrets' documented extension point): when a pattern has a
group, only the group (the value) is redacted, so "PGPASSWORD=[REDACTED:...]" still says which
variable was set. detect-secrets' filters still apply (templated values, `$VAR` references, uuids).
"""

from __future__ import annotations

import re

from detect_secrets.plugins.base import RegexBasedDetector

# A value that is a secret rather than a setting: not only digits, not a boolean or a null.
_NOT_A_SETTING = r"(?!(?:\d+|true|false|yes|no|on|off|none|null|nil)(?![^\s'\";,]))"


class AnthropicKeyDetector(RegexBasedDetector):
    """Anthropic API and admin keys: "sk-ant-api03-..." and "sk-ant-admin01-..." (the prefix is
    Anthropic's published key format)."""

    secret_type = "Anthropic API Key"
    denylist = [re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")]


class OpenAIProjectKeyDetector(RegexBasedDetector):
    """OpenAI project, service-account and admin keys ("sk-proj-...", "sk-svcacct-...",
    "sk-admin-..."), which lack the "T3BlbkFJ" marker detect-secrets' OpenAI detector needs."""

    secret_type = "OpenAI API Key"
    denylist = [re.compile(r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}")]


class EnvSecretAssignmentDetector(RegexBasedDetector):
    """An unquoted shell or .env assignment to a variable named as a secret:
    `AWS_SECRET_ACCESS_KEY=...`, `export PGPASSWORD=...`, `GITHUB_TOKEN=...` (detect-secrets'
    keyword detector wants quotes outside code files). The variable name is upper case, as an
    environment variable's is; `$OTHER` references, `<placeholders>` and plain numbers or booleans
    are not secrets."""

    secret_type = "Secret Assignment"
    denylist = [re.compile(
        r"(?<![A-Za-z0-9_])[A-Z][A-Z0-9_]*(?:SECRET|PASSWORD|PASSWD|PASSPHRASE|TOKEN|API_?KEY|ACCESS_?KEY|"
        r"PRIVATE_?KEY|CREDENTIALS?)[A-Z0-9_]*=" + _NOT_A_SETTING + r"([^\s'\"$;<{][^\s'\";]{3,})")]


class PasswordProseDetector(RegexBasedDetector):
    """A password given in prose: "the password is hunter22", "password: Tr0ub4dor&3". The value
    must hold a letter and a digit or symbol, so "the password is required" is left alone."""

    secret_type = "Password In Prose"
    denylist = [re.compile(
        r"(?i)\b(?:password|passwd|passphrase|pwd)\s*(?:is|was|:|=)\s*"
        r"(?=[^\s'\"]*[A-Za-z])(?=[^\s'\"]*[0-9!@#%^&*+=?~])([^\s'\"]{6,})")]
