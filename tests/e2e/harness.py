"""Run the real Claude Code CLI against :mod:`fake_api`, in an isolated HOME and project.

:func:`ensure_claude_code` installs the pinned CLI with npm into a cache folder.
:class:`ClaudeHarness` runs ``claude`` (one-shot ``-p``, multi-turn stream-json, or any
subcommand) with a clean environment that points at the fake API.

Process hygiene: every CLI gets ``CAIRN_E2E_RUN_ID=<id>`` in its environment, which its hooks and
MCP servers inherit. Claude Code starts hook commands in a *new session* (setsid), so a process
group kill misses them; instead, on a timeout and at fixture teardown, every process whose
``/proc/<pid>/environ`` carries this test's id is killed (:meth:`ClaudeHarness.kill_leftovers`).
"""

from __future__ import annotations

import fcntl
import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fake_api import FakeAnthropicAPI

CLAUDE_CODE_VERSION = "2.1.328"
CLAUDE_CODE_PACKAGE = "@anthropic-ai/claude-code"
DEFAULT_TIMEOUT = 120.0
RUN_ID_VAR = "CAIRN_E2E_RUN_ID"

# Inherited variables that would leak the caller's Claude Code / API configuration into the test.
_SCRUB_PREFIXES = ("ANTHROPIC_", "CLAUDE", "MCP_", "OTEL_", "DISABLE_", "ENABLE_")


class HarnessError(RuntimeError):
    """A CLI command failed or timed out; the message carries its output."""


# --------------------------------------------------------------------------- installation


def claude_code_dir(repo_root: Path) -> Path:
    """Return the npm cache folder: $CAIRN_E2E_CLAUDE_DIR or ``<repo>/.cache/claude-code``."""
    override = os.environ.get("CAIRN_E2E_CLAUDE_DIR")
    return Path(override).expanduser().resolve() if override else repo_root / ".cache" / "claude-code"


def _installed_version(install_dir: Path) -> str | None:
    manifest = install_dir / "node_modules" / CLAUDE_CODE_PACKAGE / "package.json"
    binary = install_dir / "node_modules" / ".bin" / "claude"
    if not (manifest.is_file() and binary.exists()):
        return None
    return str(json.loads(manifest.read_text()).get("version"))


def ensure_claude_code(install_dir: Path, npm: str) -> Path:
    """Install the pinned Claude Code into ``install_dir`` unless present; return the ``claude`` path.

    Safe against concurrent callers (file lock). Raises :class:`HarnessError` if npm fails or the
    installed binary does not report the pinned version.
    """
    install_dir.mkdir(parents=True, exist_ok=True)
    binary = install_dir / "node_modules" / ".bin" / "claude"
    with open(install_dir / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _installed_version(install_dir) != CLAUDE_CODE_VERSION:
            # Our own package.json stops npm from walking up to an enclosing project.
            (install_dir / "package.json").write_text(
                json.dumps({"name": "cairn-e2e-claude-code", "private": True}) + "\n")
            argv = [npm, "install", "--no-audit", "--no-fund", "--save-exact", "--loglevel=error",
                    f"{CLAUDE_CODE_PACKAGE}@{CLAUDE_CODE_VERSION}"]
            proc = subprocess.run(argv, cwd=install_dir, capture_output=True, text=True, timeout=900)
            if proc.returncode != 0:
                raise HarnessError(f"{' '.join(argv)} failed ({proc.returncode}) in {install_dir}:\n"
                                   f"{proc.stdout}\n{proc.stderr}")
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    if not out.stdout.startswith(CLAUDE_CODE_VERSION):
        raise HarnessError(f"{binary} --version said {out.stdout!r} {out.stderr!r}, "
                           f"expected {CLAUDE_CODE_VERSION}")
    return binary


# --------------------------------------------------------------------------- process helpers


def tagged_pids(run_id: str) -> list[int]:
    """Return the live (non-zombie) pids whose environment has ``CAIRN_E2E_RUN_ID=<run_id>``.

    Linux only (reads /proc); returns [] elsewhere.
    """
    needle = f"{RUN_ID_VAR}={run_id}".encode()
    pids: list[int] = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().rsplit(") ", 1)[1].startswith("Z"):
                continue
        except (OSError, IndexError):
            continue
        pids.append(int(entry.name))
    return pids


def _kill(pids: Iterable[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _describe(argv: Sequence[str], proc: subprocess.CompletedProcess[str] | None = None,
              stdout: str = "", stderr: str = "") -> str:
    if proc is not None:
        stdout, stderr = proc.stdout, proc.stderr
    return f"$ {' '.join(argv)}\n--- stdout ---\n{stdout[-4000:]}\n--- stderr ---\n{stderr[-4000:]}"


def pristine_copy(repo: Path, dest: Path) -> Path:
    """Copy the files git would ship (tracked, plus untracked ones not ignored) from `repo` into `dest`.

    `claude plugin install` copies a directory marketplace's whole folder into the plugin cache: a
    checkout's .venv and .cache (about 2 GB) would be copied for every test. Users install from a
    clone, which has neither. Modification times are kept, so the warm process's code version
    (cairn.warm.code_version) is the same for the copy and the checkout.
    """
    listed = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = repo / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest


@dataclass
class ClaudeResult:
    """A finished ``claude -p`` run: ``proc`` (returncode/stdout/stderr) and ``json`` (parsed stdout).

    ``json`` is the ``{"type": "result", ...}`` object of ``--output-format json``, or None if
    stdout was not JSON. ``seconds`` is the wall time of the run.
    """

    proc: subprocess.CompletedProcess[str]
    json: dict[str, Any] | None
    seconds: float

    @property
    def result_text(self) -> str:
        """The final assistant text (``json["result"]``), or "" if absent."""
        return str((self.json or {}).get("result") or "")


@dataclass
class ClaudeTurns:
    """A finished multi-turn (stream-json) session.

    ``events``: every stdout JSON line in order; ``results``: the ``type == "result"`` events, one
    per turn; ``returncode`` and ``stderr`` of the CLI; ``seconds``: wall time.
    """

    events: list[dict[str, Any]]
    results: list[dict[str, Any]]
    returncode: int
    stderr: str
    seconds: float


@dataclass
class ClaudeHarness:
    """One test's isolated Claude Code world: ``home``, ``project`` (a git repo), ``api``, ``tmp``."""

    claude_bin: Path
    home: Path
    project: Path
    tmp: Path
    api: FakeAnthropicAPI
    base_env: dict[str, str] = field(default_factory=dict)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    # environment -------------------------------------------------------------

    def env(self, env_extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """Return the CLI environment: scrubbed os.environ + isolation + fake-API settings + extras."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB_PREFIXES)}
        no_proxy = ",".join(filter(None, [env.get("NO_PROXY", ""), "127.0.0.1", "localhost"]))
        env.update({
            "HOME": str(self.home),
            "TMPDIR": str(self.tmp),  # the CLI keeps sockets and notes under $TMPDIR/claude-<uid>
            "NO_PROXY": no_proxy,
            "no_proxy": no_proxy,
            "ANTHROPIC_BASE_URL": self.api.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-e2e-fake",
            "ENABLE_TOOL_SEARCH": "false",
            "MCP_CONNECTION_NONBLOCKING": "0",
            # Claude Code drops an MCP server that has not answered its handshake in MCP_TIMEOUT (30 s
            # by default); on a machine made busy by other jobs, starting Python alone can take that.
            "MCP_TIMEOUT": "120000",
            "CLAUDE_CODE_MAX_RETRIES": "0",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            RUN_ID_VAR: self.run_id,
        })
        env.update(self.base_env)
        env.update(env_extra or {})
        return env

    # processes ---------------------------------------------------------------

    def leftover_processes(self) -> list[int]:
        """Return the pids of live processes started by this harness (CLI, hooks, MCP servers)."""
        return tagged_pids(self.run_id)

    def kill_leftovers(self) -> list[int]:
        """SIGKILL every live process started by this harness; return their pids."""
        pids: list[int] = []
        for _ in range(3):  # a dying parent may still spawn: sweep until quiet
            found = self.leftover_processes()
            if not found:
                break
            _kill(found)
            pids += found
            time.sleep(0.05)
        return pids

    # running -----------------------------------------------------------------

    def cli(self, *args: str, cwd: Path | None = None, env_extra: Mapping[str, str] | None = None,
            input: str | None = None, timeout: float = DEFAULT_TIMEOUT,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``claude <args>`` and return the completed process.

        Raises :class:`HarnessError` on timeout, or on a non-zero exit when ``check`` is true.
        """
        argv = [str(self.claude_bin), *args]
        proc = subprocess.Popen(argv, cwd=cwd or self.project, env=self.env(env_extra), text=True,
                                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            stdout, stderr = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill_leftovers()
            stdout, stderr = proc.communicate()
            raise HarnessError(
                f"timed out after {timeout} s\n{_describe(argv, stdout=stdout, stderr=stderr)}") from None
        except BaseException:  # e.g. KeyboardInterrupt: leave nothing running
            self.kill_leftovers()
            raise
        done = subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
        if check and done.returncode != 0:
            raise HarnessError(f"exit {done.returncode}\n{_describe(argv, done)}")
        return done

    def run_claude(self, prompt: str, *, cwd: Path | None = None,
                   env_extra: Mapping[str, str] | None = None, allowed_tools: Iterable[str] = (),
                   plugin_dir: Path | None = None, extra_args: Sequence[str] = (),
                   timeout: float = DEFAULT_TIMEOUT) -> ClaudeResult:
        """Run one ``claude -p <prompt> --output-format json`` turn; return a :class:`ClaudeResult`.

        ``allowed_tools`` become ``--allowedTools`` (MCP tools are denied in -p mode otherwise; a
        bare ``mcp__plugin_<p>_<s>`` allows all of a server's tools). ``plugin_dir`` adds
        ``--plugin-dir``. A non-zero exit is *not* raised: assert on ``result.proc.returncode``.
        """
        args = ["-p", prompt, "--output-format", "json", *self._common_args(allowed_tools, plugin_dir),
                *extra_args]
        start = time.monotonic()
        proc = self.cli(*args, cwd=cwd, env_extra=env_extra, timeout=timeout, check=False)
        try:
            parsed = json.loads(proc.stdout)
        except ValueError:
            parsed = None
        return ClaudeResult(proc, parsed if isinstance(parsed, dict) else None, time.monotonic() - start)

    def run_claude_turns(self, prompts: Sequence[str], *, cwd: Path | None = None,
                         env_extra: Mapping[str, str] | None = None, allowed_tools: Iterable[str] = (),
                         plugin_dir: Path | None = None, extra_args: Sequence[str] = (),
                         timeout: float = DEFAULT_TIMEOUT) -> ClaudeTurns:
        """Run one session with several user turns (stream-json in and out); return :class:`ClaudeTurns`.

        Each prompt is written as one JSON line after the previous turn's ``result`` event; stdin
        is closed after the last one. ``timeout`` bounds the whole session. On a timeout, or if the
        CLI exits early, everything it started is killed and :class:`HarnessError` is raised.
        """
        argv = [str(self.claude_bin), "-p", "--input-format", "stream-json", "--output-format",
                "stream-json", "--verbose", *self._common_args(allowed_tools, plugin_dir), *extra_args]
        start = time.monotonic()
        deadline = start + timeout
        events: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        lines: queue.Queue[str | None] = queue.Queue()
        stderr_chunks: list[str] = []
        with subprocess.Popen(argv, cwd=cwd or self.project, env=self.env(env_extra), text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              start_new_session=True) as proc:
            stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr
            assert stdin is not None and stdout is not None and stderr is not None

            def pump() -> None:
                for out_line in stdout:
                    lines.put(out_line)
                lines.put(None)  # EOF

            readers = [threading.Thread(target=pump, daemon=True),
                       threading.Thread(target=lambda: stderr_chunks.extend(stderr), daemon=True)]
            for reader in readers:
                reader.start()

            def fail(why: str) -> HarnessError:
                self.kill_leftovers()
                proc.wait()
                for reader in readers:
                    reader.join(timeout=5)
                tail = "\n".join(json.dumps(e) for e in events[-5:])
                return HarnessError(f"{why}\n{_describe(argv, stdout=tail, stderr=''.join(stderr_chunks))}")

            try:
                for turn, prompt in enumerate(prompts, 1):
                    try:
                        stdin.write(json.dumps({"type": "user", "message": {"role": "user", "content": prompt}}) + "\n")
                        stdin.flush()
                    except BrokenPipeError:
                        raise fail(f"CLI closed stdin before turn {turn}") from None
                    while len(results) < turn:
                        try:
                            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
                        except queue.Empty:
                            raise fail(f"timed out after {timeout} s in turn {turn}") from None
                        if line is None:
                            raise fail(f"CLI exited before answering turn {turn}")
                        if line.strip():
                            events.append(json.loads(line))
                            if events[-1].get("type") == "result":
                                results.append(events[-1])
                stdin.close()
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    raise fail(f"CLI did not exit within {timeout} s after stdin closed") from None
                for reader in readers:
                    reader.join(timeout=5)
                while not lines.empty():
                    if (line := lines.get_nowait()) and line.strip():
                        events.append(json.loads(line))
            except BaseException:  # timeouts, early exits, KeyboardInterrupt: leave nothing running
                self.kill_leftovers()
                raise
        return ClaudeTurns(events, results, proc.returncode, "".join(stderr_chunks), time.monotonic() - start)

    @staticmethod
    def _common_args(allowed_tools: Iterable[str], plugin_dir: Path | None) -> list[str]:
        args: list[str] = []
        tools = ",".join(allowed_tools)
        if tools:
            args.append(f"--allowedTools={tools}")  # '=' form: the option is variadic
        if plugin_dir is not None:
            args += ["--plugin-dir", str(plugin_dir)]
        return args

    # plugins -----------------------------------------------------------------

    def install_plugin_from_marketplace(self, marketplace_dir: Path, plugin: str | None = None) -> str:
        """``claude plugin marketplace add <dir>`` then ``claude plugin install <plugin>@<marketplace>``.

        ``plugin`` defaults to the marketplace's only (first) plugin. Returns ``"<plugin>@<marketplace>"``.
        Raises :class:`HarnessError` if either command fails.
        """
        manifest = json.loads((marketplace_dir / ".claude-plugin" / "marketplace.json").read_text())
        plugin = plugin or manifest["plugins"][0]["name"]
        ref = f"{plugin}@{manifest['name']}"
        if (marketplace_dir / ".git").exists():
            marketplace_dir = pristine_copy(marketplace_dir, self.tmp / "marketplace")
        self.cli("plugin", "marketplace", "add", str(marketplace_dir.resolve()))
        self.cli("plugin", "install", ref)
        return ref

    def validate_plugin(self, plugin_dir: Path) -> subprocess.CompletedProcess[str]:
        """Run ``claude plugin validate <dir>`` (not checked); return the completed process."""
        return self.cli("plugin", "validate", str(plugin_dir), check=False)


def npm_executable() -> str | None:
    """Return the path of ``npm`` on PATH, or None."""
    return shutil.which("npm")
