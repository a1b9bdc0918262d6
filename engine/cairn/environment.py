"""The process environment, read in one place: what the public API uses when its caller passes no `env`.

The core never reads `os.environ` itself (tests/test_architecture.py holds it to that): what it
needs from the environment (CAIRN_HOME, CAIRN_STORE, CAIRN_CONFIG, CAIRN_POSTGRES_URL, HOME and the
XDG folders) comes in as `env`, a `Mapping[str, str]`. The composition roots read their own
`os.environ` once and pass it down: the hook process (adapters/claude/hook_process.py), the warm
process (adapters/warm/service.py; a hook's variables come with its request), the MCP server
(adapters/mcp/server.py) and the CLI, `cairn serve` included (adapters/cli/_common.py). A library
user who calls the public API (`Cairn.open`, `resolve`, `load_config`, `data_root`, the store
administration functions) without `env` gets `process_env()`: this process's environment, read at
the call, so a variable set after `import cairn` still counts, as it always has.
"""

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (locations.py is on the hook's path)
if TYPE_CHECKING:
    from collections.abc import Mapping


def process_env() -> "Mapping[str, str]":
    """This process's environment (`os.environ` itself, not a copy: read live at each use): what a
    public function that takes `env` (Cairn.open, resolve, load_config, data_root, ...) reads when
    given none. The core reads the environment nowhere else."""
    return os.environ


def or_process(env: "Mapping[str, str] | None") -> "Mapping[str, str]":
    """`env` when a caller gave one, else process_env(): the one default of every `env=None`."""
    return process_env() if env is None else env
