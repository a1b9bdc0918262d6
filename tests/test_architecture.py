"""The picture is the code: hook / MCP / CLI / warm process -> engine API (`cairn`) -> store.

Checked on the source's syntax trees (ast), so a new module is held to the same rules the day it
is added:
- the core (engine/cairn outside adapters/) never imports an adapter, nor an adapter's framework;
- only the storage modules (the `cairn.storage` package) run SQL (`.execute`, `.executemany`,
  `.executescript` calls), and storage imports nothing above it (the engine, ranking, review ...);
- adapters use only the names `cairn` exports (`cairn.__all__`), never a core module directly, and
  never reach into the engine's store, connection or internals;
- the review modules and the sessions API use a store only by their role (ReviewStore, SessionStore
  in storage/protocol.py): no StoreBackend, no other role's method, not the engine's store;
- the core never reads the process environment (`os.environ`, `os.getenv`): it is given an `env`
  by the composition roots; `cairn.environment` is the one place that reads it, for a caller of the
  public API that passes none; among the adapters only the roots read it, each in one place;
- the environment a root passes reaches the data root: every core call of a function that finds
  the data root, a store, a marker or the Postgres URL from an environment hands its `env` on
  (storage is given the data root itself and reads no environment);
- neither the core nor the adapters import in a circle: every import counts, at module level, inside a function (a lazy
  import runs when the function does) and under `if TYPE_CHECKING:` (a type is a dependency too:
  the module cannot be read or checked without the other), so each core module stands wholly above
  or below any other.
"""

from __future__ import annotations

import ast
import graphlib
import os
from pathlib import Path

import pytest

import cairn

PACKAGE = Path(cairn.__file__).resolve().parent
# What storage may import besides itself: the records it stores and the helpers they need.
BELOW_STORAGE = {"cairn.errors", "cairn.models", "cairn.text", "cairn.timeutil", "cairn.home"}
ADAPTER_FRAMEWORKS = {"click", "mcp", "pydantic", "socketserver", "starlette", "tqdm", "uvicorn"}
SQL_CALLS = {"execute", "executemany", "executescript"}
# What an adapter may not touch on an engine: its store and connection, and the store's row ids.
INTERNALS = {"store", "conn", "seq_of", "vectors_of", "by_seqs", "_stores", "_store_holding", "global_store"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, ast.Module]:
    return {_module_name(p): ast.parse(p.read_text(encoding="utf-8"), str(p)) for p in sorted(PACKAGE.rglob("*.py"))}


MODULES = _modules()
STORAGE = {name for name in MODULES if name == "cairn.storage" or name.startswith("cairn.storage.")}
# `python -m cairn` is an entry point: it dispatches to the CLI and hook adapters.
ADAPTERS = {name for name in MODULES if name.startswith("cairn.adapters") or name == "cairn.__main__"}
CORE = set(MODULES) - ADAPTERS


def _imports(name: str, tree: ast.Module) -> list[tuple[str, list[str], int]]:
    """(absolute module, imported names, line) for every import in the module, at any depth."""
    package = name if name.endswith("__init__") or (PACKAGE / "/".join(name.split(".")[1:]) / "__init__.py").exists() \
        else name.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, [], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.append((module, [alias.name for alias in node.names], node.lineno))
    return out


def test_the_tree_is_what_this_test_expects():
    assert {"cairn.memories.engine", "cairn.storage.sqlite", "cairn.storage.postgres.store", "cairn.storage.db"} <= CORE
    # The engine's steps and the supersession classifier's modules (issue #32's split).
    assert {"cairn.memories.writes", "cairn.memories.detection", "cairn.memories.reads", "cairn.memories.supersede",
            "cairn.memories.supersede_words", "cairn.memories.supersede_rules", "cairn.memories.supersede_parts",
            "cairn.memories.supersede_guards"} <= CORE
    assert {"cairn.storage.protocol", "cairn.storage.sql", "cairn.storage.base", "cairn.storage.migrations"} <= STORAGE
    assert {"cairn.adapters.cli", "cairn.adapters.claude.hooks", "cairn.adapters.claude.capture",
            "cairn.adapters.claude.transcripts", "cairn.adapters.claude.hook_process", "cairn.adapters.warm.client",
            "cairn.adapters.warm.service", "cairn.adapters.http", "cairn.adapters.tokens", "cairn.adapters.clients",
            "cairn.adapters.mcp.server", "cairn.adapters.mcp.session"} <= ADAPTERS


def _resolve(module: str, names: list[str]) -> list[str]:
    """The modules of the package an import names: `from .storage import db` names cairn.storage.db,
    `from .text import stems` names cairn.text. Outside the package: []."""
    if not module.startswith("cairn"):
        return []
    found = [f"{module}.{n}" for n in names if f"{module}.{n}" in MODULES]
    return found if found and len(found) == len(names) else [module, *found]


def _graph(layer: set[str]) -> dict[str, set[str]]:
    """{module of `layer`: the modules of `layer` it imports}, every import counted (module docstring)."""
    graph: dict[str, set[str]] = {name: set() for name in layer}
    for name in layer:
        for module, names, _ in _imports(name, MODULES[name]):
            graph[name] |= {m for m in _resolve(module, names) if m in layer and m != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def test_the_core_has_no_import_cycle():
    graph = _graph(CORE)
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        circle = " -> ".join(reversed(exc.args[1]))
        tangles = "; ".join(" <-> ".join(c) for c in _cycles(graph))
        raise AssertionError(f"the core imports in a circle: {circle} (all tangles: {tangles})") from None


def test_the_adapters_have_no_import_cycle():
    # Lazy imports count here too: the hook process imports claude.hooks only off its warm path,
    # and a circle through it would still tie the modules into one.
    tangles = _cycles(_graph(ADAPTERS))
    assert not tangles, "the adapters import in a circle: " + "; ".join(" <-> ".join(c) for c in tangles)


def test_the_cycle_rule_sees_a_circle():
    # The rule above cannot pass by seeing nothing: a lazy import closing a loop is found.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert {"cairn.storage.db", "cairn.errors"} <= _graph(CORE)["cairn.storage.sqlite"]
    assert "cairn.adapters.claude.hooks" in _graph(ADAPTERS)["cairn.adapters.claude.hook_process"]  # a lazy import


# The core's areas, each a folder (docs/architecture.md): an area's modules import only areas below
# it and the package's shared modules (models, text, errors, ...), never an area above.
AREAS = {"storage": 0, "privacy": 0, "stores": 1, "memories": 2, "review": 3, "sessions": 3}


def _area(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in AREAS else None


def test_the_areas_are_folders_with_a_face():
    for area in AREAS:
        init = PACKAGE / area / "__init__.py"
        tree = ast.parse(init.read_text(encoding="utf-8"))
        assert ast.get_docstring(tree), f"cairn/{area}/__init__.py says what the area owns"
        if area != "storage":  # the storage package's face names its contract
            assert len(tree.body) == 1, f"cairn/{area}/__init__.py is its docstring alone (importing it costs nothing)"


def test_each_area_imports_only_areas_below_it():
    for name in CORE:
        mine = _area(name)
        for module, names, line in _imports(name, MODULES[name]):
            for imported in _resolve(module, names):
                theirs = _area(imported)
                if mine is None or theirs is None or theirs == mine:
                    continue
                assert AREAS[theirs] < AREAS[mine], f"{name}:{line} imports {imported}: {mine} stands below {theirs}"


def test_the_areas_and_the_shared_modules_have_no_circle():
    # Drawn as the house is drawn, each area one room: an area that imports a shared module which
    # imports the area back ties them into one.
    def room(module: str) -> str:
        area = _area(module)
        return f"cairn.{area}" if area else module

    graph: dict[str, set[str]] = {}
    for name, targets in _graph(CORE).items():
        graph.setdefault(room(name), set()).update(room(t) for t in targets if room(t) != room(name))
    for targets in list(graph.values()):
        for t in targets:
            graph.setdefault(t, set())
    tangles = _cycles(graph)
    assert not tangles, "rooms of the core import in a circle: " + "; ".join(" <-> ".join(c) for c in tangles)


def test_no_two_modules_share_a_name():
    seen: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        assert path.name not in seen, f"{path.relative_to(PACKAGE)} and {seen[path.name].relative_to(PACKAGE)}"
        seen[path.name] = path


@pytest.mark.parametrize("name", sorted(CORE))
def test_the_core_never_imports_an_adapter(name):
    for module, names, line in _imports(name, MODULES[name]):
        top = module.split(".")[0]
        assert not module.startswith("cairn.adapters"), f"{name}:{line} imports {module}"
        assert top not in ADAPTER_FRAMEWORKS, f"{name}:{line} imports the adapter framework {module}"
        if module == "cairn":
            assert "adapters" not in names, f"{name}:{line} imports cairn.adapters"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_only_storage_modules_run_sql(name):
    if name in STORAGE:
        return
    for node in ast.walk(MODULES[name]):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            assert node.func.attr not in SQL_CALLS, f"{name}:{node.lineno} runs SQL (.{node.func.attr})"


@pytest.mark.parametrize("name", sorted(STORAGE))
def test_storage_imports_nothing_above_it(name):
    for module, names, line in _imports(name, MODULES[name]):
        for imported in [f"{module}.{n}" for n in names] if module in ("cairn", "cairn.storage") else [module]:
            if imported.startswith("cairn"):
                assert imported in STORAGE | BELOW_STORAGE, f"{name}:{line} imports {imported}"


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_adapters_use_only_what_cairn_exports(name):
    exported = set(cairn.__all__) | {"__version__"}
    for module, names, line in _imports(name, MODULES[name]):
        if not module.startswith("cairn"):
            continue
        if module.startswith("cairn.adapters"):
            continue  # one adapter using another (the hook uses the warm client)
        assert module == "cairn", f"{name}:{line} imports {module} directly; use `from cairn import ...`"
        unknown = set(names) - exported
        assert not unknown, f"{name}:{line} imports {sorted(unknown)}, which cairn does not export"
    for node in ast.walk(MODULES[name]):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "cairn":
            assert node.attr in exported, f"{name}:{node.lineno} uses cairn.{node.attr}, which cairn does not export"


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_adapters_never_reach_past_the_engine(name):
    for node in ast.walk(MODULES[name]):
        if isinstance(node, ast.Attribute) and node.attr in INTERNALS:
            assert False, f"{name}:{node.lineno} reaches past the engine API (.{node.attr})"
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr == "embedder":
                    assert False, f"{name}:{node.lineno} reassigns an engine's embedder; pass it at open"


def test_every_exported_name_resolves():
    for name in cairn.__all__:
        assert getattr(cairn, name) is not None, name


def test_the_plugin_launchers_go_through_the_adapters():
    root = PACKAGE.parent.parent
    assert "from cairn.adapters.claude.hook_process import hook_main; hook_main(sys.argv[1:], hook_process=True)" in (
        root / "hooks" / "cairn-hook").read_text()
    launcher = ast.parse((root / "mcp" / "server.py").read_text())
    imported = {n.module for n in ast.walk(launcher) if isinstance(n, ast.ImportFrom)}
    assert {m for m in imported if m.startswith("cairn")} == {"cairn.adapters.mcp.server"}


# All the hook process may import on its warm path beyond what the interpreter has at start (the
# C halves of socket and json, and sha256's), until the warm process has answered. Held for a real
# hook process asking a stand-in warm process in tests/adapters/test_lean_hook.py.
HOOK_WARM_PATH_MODULES = frozenset({
    "cairn", "cairn.adapters", "cairn.adapters.claude", "cairn.adapters.claude.hook_process",
    "cairn.adapters.warm", "cairn.adapters.warm.client", "cairn.locations", "_json", "_socket", "_sha256", "_sha2"})


def test_the_hook_process_imports_nothing_heavy_before_it_needs_to():
    # The hook module and the warm client, as the hook's warm path imports them: nothing else, so
    # none of pathlib, typing, dataclasses, subprocess, tempfile, platformdirs, json, socket, re.
    import subprocess
    import sys

    code = ("import sys\n"
            "before = set(sys.modules)\n"
            "import cairn.adapters.claude.hook_process, cairn.adapters.warm.client\n"
            "print(' '.join(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)})
    imported = set(out.stdout.split())
    assert {"cairn.adapters.claude.hook_process", "cairn.adapters.warm.client"} <= imported
    assert imported <= HOOK_WARM_PATH_MODULES, sorted(imported - HOOK_WARM_PATH_MODULES)


# The review area and the sessions area use a store by their role alone (storage/protocol.py): the
# module -> the one role protocol it may use. Memories they reach through the engine's methods.
ROLE_OF = {"cairn.review.review_api": "ReviewStore", "cairn.review.queue": "ReviewStore",
           "cairn.review.staging": "ReviewStore", "cairn.review.maintenance": "ReviewStore",
           "cairn.sessions.sessions_api": "SessionStore"}
# What they may not touch on an engine: its store (pass the role's handle instead) and its internals.
ENGINE_INTERNALS = INTERNALS | {"_claim_space"}


def _contract(role: str) -> set[str]:
    """The methods and attributes of a role protocol, its bases' included (StoreCore: name, transaction, meta)."""
    from cairn.storage import protocol

    names: set[str] = set()
    for klass in getattr(protocol, role).__mro__:
        if klass.__module__ == protocol.__name__:
            names |= {n for n in vars(klass) if not n.startswith("_")} | set(vars(klass).get("__annotations__", {}))
    return names


def _role_violations(tree: ast.Module, role: str) -> list[str]:
    """Where a module uses a store other than by `role`: a protocol other than its role named (StoreBackend,
    another role), the engine's store or internals reached, or a store handle (an argument annotated with the
    role, `self._store`, a name bound to either) asked for a method outside the role's contract."""
    from cairn.storage import protocol

    others = {n for n, o in vars(protocol).items() if isinstance(o, type) and o.__module__ == protocol.__name__
              and n not in (role, "VectorTable")}
    allowed = _contract(role)
    handles: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None and role in ast.unparse(node.annotation):
            handles.add(node.arg)
    out: list[str] = []

    def is_handle(node: ast.expr) -> bool:
        return (isinstance(node, ast.Name) and node.id in handles) or \
            (isinstance(node, ast.Attribute) and node.attr == "_store" and isinstance(node.value, ast.Name)
             and node.value.id == "self")

    for node in ast.walk(tree):  # names bound to a handle: `store = self._store`
        if isinstance(node, ast.Assign) and is_handle(node.value):
            handles |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in others:
            out.append(f"line {node.lineno} names {node.id}, not its role {role}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.endswith("protocol"):
            out += [f"line {node.lineno} imports {a.name}" for a in node.names if a.name in others]
        elif isinstance(node, ast.Attribute) and node.attr in ENGINE_INTERNALS:
            out.append(f"line {node.lineno} reaches past the engine API (.{node.attr})")
        elif isinstance(node, ast.Attribute) and is_handle(node.value) and node.attr not in allowed:
            out.append(f"line {node.lineno} asks its {role} for .{node.attr}, which is not in its contract")
    return out


def test_every_review_module_is_held_to_its_role():
    # every module of the review area but its face and the guidance reader (which reads files, not a store)
    held = {name for name in CORE if _area(name) == "review"} - {"cairn.review", "cairn.review.guidance"}
    assert held <= set(ROLE_OF)
    assert set(ROLE_OF) <= CORE


@pytest.mark.parametrize("name", sorted(ROLE_OF))
def test_the_review_and_sessions_areas_use_a_store_only_by_their_role(name):
    problems = _role_violations(MODULES[name], ROLE_OF[name])
    assert not problems, f"{name}: " + "; ".join(problems)


def test_the_role_rule_sees_a_store_used_outside_its_role():
    # The rule above cannot pass by seeing nothing: each way out of a role is found.
    source = '''
from .storage.protocol import ReviewStore, StoreBackend

def expire(engine, store: ReviewStore) -> int:
    held = store.proposals(states=("pending",))        # in the contract
    named = store.name                                  # StoreCore's, in every role
    m = store.get("01J")                                # MemoryStore's: not the review's
    same = store
    same.record_usage(["01J"], column="cited", at=0)    # UsageStore's, through another name
    return engine.store.counts()["current"]            # the engine's store: not a handle it was given

def whole(engine) -> StoreBackend:                      # every role at once
    return engine._store_holding("01J")

class Area:
    def count(self) -> int:
        return self._store.session_totals() + self._engine._claim_space(None)
'''
    problems = " ".join(_role_violations(ast.parse(source), "ReviewStore"))
    for found in ("imports StoreBackend", "names StoreBackend", ".get,", ".record_usage,", "(.store)",
                  "(._store_holding)", ".session_totals,", "(._claim_space)"):
        assert found in problems, (found, problems)
    assert ".proposals" not in problems and ".name," not in problems
    assert {"proposals", "take_lease", "transaction", "get_meta", "name", "set_cold"} <= _contract("ReviewStore")
    assert not {"get", "record_usage", "add_turns", "close"} & _contract("ReviewStore")


def test_a_read_loads_no_credential_rules():
    # The scrubber's rule sets take a fresh process about 100 ms to load (their regular expressions);
    # only a write scrubs, so what a read imports (cairn.api, the engine, recall) leaves them out.
    import subprocess
    import sys

    code = ("import sys, cairn.api, cairn.context\n"
            "print(' '.join(m for m in sys.modules if m.startswith('cairn.privacy')))")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)})
    assert out.stdout.split() == []


# Where the process environment may be read. In the core only `cairn.environment` (process_env: the
# default of every public `env=None`); every other core module is given an `env` by its caller.
ENVIRONMENT_DEFAULT = "cairn.environment"
# What the core may do to os.environ without reading configuration from it: set a library's switch
# before importing the library (telemetry off, no progress bars), as `update` and `setdefault` do.
ENVIRON_WRITES = {"update", "setdefault"}


def _environment_reads(tree: ast.Module) -> list[str]:
    """Where a module reads the process environment: `os.environ` used other than as the target of
    an assignment or the object of `.update` / `.setdefault`, `os.getenv` / `os.environb`, or any
    of them imported by name (`from os import environ`)."""
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ENVIRON_WRITES:
            allowed.add(id(node.func.value))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
            allowed.add(id(node.value))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os" \
                and node.attr in ("environ", "environb", "getenv", "getenvb") and id(node) not in allowed:
            out.append(f"line {node.lineno} reads os.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            out += [f"line {node.lineno} imports os.{a.name}" for a in node.names
                    if a.name in ("environ", "environb", "getenv", "getenvb")]
    return sorted(out, key=lambda problem: int(problem.split()[1]))


@pytest.mark.parametrize("name", sorted(CORE - {ENVIRONMENT_DEFAULT}))
def test_the_core_never_reads_the_process_environment(name):
    problems = _environment_reads(MODULES[name])
    assert not problems, (f"{name}: " + "; ".join(problems) + ": take an `env` from the caller (its composition "
                          "root reads os.environ), or default to cairn.environment.process_env()")


def test_the_environment_rule_sees_a_read():
    # The rule above cannot pass by seeing nothing: each way of reading is found, and the writes
    # the core may make (a library's switch) are not taken for reads.
    source = '''
import os
from os import environ, getenv

home = os.environ.get("CAIRN_HOME")
store = os.environ["CAIRN_STORE"]
everything = dict(os.environ)
level = os.getenv("CAIRN_LOG_LEVEL")
env = os.environ if env is None else env
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.update({"DO_NOT_TRACK": "1"})
os.environ["HF_HUB_OFFLINE"] = "1"
'''
    problems = _environment_reads(ast.parse(source))
    assert problems == ["line 3 imports os.environ", "line 3 imports os.getenv", "line 5 reads os.environ",
                        "line 6 reads os.environ", "line 7 reads os.environ", "line 8 reads os.getenv",
                        "line 9 reads os.environ"], problems
    assert ENVIRONMENT_DEFAULT in CORE and _environment_reads(MODULES[ENVIRONMENT_DEFAULT])


# The adapters' composition roots, one per process kind, each reading the process environment in one
# place and passing it down; every other adapter module is given it (or asks cairn.process_env()).
ADAPTER_ROOTS = {
    "cairn.adapters.claude.hook_process": "the hook process (process_environ)",
    "cairn.adapters.warm.service": "the warm process (serve)",
    "cairn.adapters.mcp.server": "the MCP server (process_environ)",
    "cairn.adapters.cli._common": "the CLI, `cairn serve` included (environ)",
    "cairn.adapters.warm.client": "the warm client's default for a caller that gives no environ (_environ)",
}


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_only_the_adapters_roots_read_the_process_environment_each_in_one_place(name):
    problems = _environment_reads(MODULES[name])
    if name in ADAPTER_ROOTS:
        assert len(problems) == 1, f"{name}, {ADAPTER_ROOTS[name]}, reads the environment once: {problems}"
    else:
        assert not problems, f"{name}: " + "; ".join(problems) + ": take it from the root that calls this"


# The functions that read the data root, a store's place, a Postgres marker, the server's URL or
# the config from an environment (`env`, default environment.process_env()). A core call of one
# without `env=` would take this process's environment even when a root passed another (issue 32).
# private_dir may be given the data root itself (`root=`), SqliteStore.open the data root
# (`data_root=`): then no environment is read.
ENV_CHAIN = {"data_root", "unusable_data_root", "ensure_data_root", "private_dir", "write_private", "stores_dir",
             "backups_dir", "store_path", "marker_path", "marker_schema", "write_marker", "postgres_names",
             "backend_of", "postgres_url", "open_store", "load_config", "user_config_path", "choose_store",
             "resolve", "list_stores", "delete_store", "rename_store", "create_store", "migrate_store",
             "backups_of", "backup_store", "restore_store", "doctor"}
ENV_GIVEN_AS = {"private_dir": {"env", "root"}}
# Module names the core calls these through (`home.data_root(...)`, `backends.postgres_url(...)`).
CHAIN_MODULES = {"home", "paths", "backends", "admin", "config", "compose", "health"}


def _env_not_passed(tree: ast.Module) -> list[str]:
    """Calls of ENV_CHAIN functions (by name, or through a CHAIN_MODULES module) without `env=`,
    and SqliteStore.open without `data_root=`."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name):
            called = func.id
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in CHAIN_MODULES:
            called = func.attr
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "SqliteStore" \
                and func.attr == "open":
            if "data_root" not in {k.arg for k in node.keywords}:
                out.append(f"line {node.lineno} calls SqliteStore.open without data_root=")
            continue
        else:
            continue
        wanted = ENV_GIVEN_AS.get(called, {"env"})
        if called in ENV_CHAIN and not wanted & {k.arg for k in node.keywords}:
            out.append(f"line {node.lineno} calls {called} without {' or '.join(sorted(w + '=' for w in wanted))}")
    return out


@pytest.mark.parametrize("name", sorted(CORE - {ENVIRONMENT_DEFAULT}))
def test_the_core_hands_the_env_it_was_given_to_the_data_root(name):
    problems = _env_not_passed(MODULES[name])
    assert not problems, (f"{name}: " + "; ".join(problems) + ": pass the `env` this function was given (the "
                          "composition root's), so the data root and the server are the ones the root named")


def test_the_env_rule_sees_a_call_that_drops_it():
    source = """
path = store_path(name)
kept = store_path(name, env=env)
url = backends.postgres_url(config)
store = SqliteStore.open(path, name=name, create=False)
folder = private_dir(path.parent, root=root)
elsewhere = Path(path).resolve()
"""
    assert _env_not_passed(ast.parse(source)) == ["line 2 calls store_path without env=",
                                                  "line 4 calls postgres_url without env=",
                                                  "line 5 calls SqliteStore.open without data_root="]

MAX_MODULE_LINES = 800  # a room a reader takes in whole (issue 32's bar)
MAX_FUNCTION_LINES = 60  # unless its docstring says why it is long ("long because ...")


def _long_functions(tree: ast.Module) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES and "long because" not in (ast.get_docstring(node) or ""):
                out.append(f"{node.name} ({length} lines)")
    return out


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_too_long_to_read_whole_nor_a_function(name):
    path = PACKAGE.parent / (name.replace(".", "/") + ".py")
    if not path.exists():
        path = PACKAGE.parent / name.replace(".", "/") / "__init__.py"
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{name} has {lines} lines: split it by what its parts do"
    long = _long_functions(MODULES[name])
    assert not long, f"{name}: {long} over {MAX_FUNCTION_LINES} lines"


def test_the_length_rule_sees_a_long_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    assert _long_functions(ast.parse(f"def f():\n{body}\n")) == ["f (62 lines)"]
    assert _long_functions(ast.parse(f'def f():\n    """long because a table."""\n{body}\n')) == []
