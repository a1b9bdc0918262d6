"""The data root as a string, with the standard library's `os` and `sys` only, from an environment.

The hook process computes the warm process's socket path from the data root before it does
anything else, within a budget of milliseconds: importing platformdirs (and the pathlib, tempfile,
re it pulls in) costs more than the whole request. So the one answer platformdirs gives Cairn,
the user data folder, is replicated here for Linux and macOS; any other platform (and the odd
environment this does not cover) asks platformdirs. `home.data_root()` is built on this function,
so the hook and the engine cannot disagree, and tests/adapters/test_lean_hook.py checks it against
platformdirs' own answer.

Each function reads the environment it is given (`env`: HOME, XDG_DATA_HOME, XDG_CONFIG_HOME,
CAIRN_HOME): a composition root passes its own; without one, environment.process_env() (imported
only then, so the hook's path stays as short as it is).
"""

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the hook's path
if TYPE_CHECKING:
    from collections.abc import Mapping

APP = "cairn"


def user_data_dir(env: "Mapping[str, str] | None" = None) -> str:
    """platformdirs.user_data_dir("cairn"): `$XDG_DATA_HOME/cairn` when that is an absolute path,
    else `~/.local/share/cairn` on Linux and `~/Library/Application Support/cairn` on macOS (both
    platforms honour XDG_DATA_HOME in platformdirs 4). Elsewhere, or when HOME is set but not
    absolute (platformdirs then asks the password database), platformdirs itself answers."""
    return _user_dir(_env(env), "XDG_DATA_HOME", "~/.local/share", "user_data_dir")


def user_config_dir(env: "Mapping[str, str] | None" = None) -> str:
    """platformdirs.user_config_dir("cairn"): `$XDG_CONFIG_HOME/cairn` when that is an absolute path,
    else `~/.config/cairn` on Linux and `~/Library/Application Support/cairn` on macOS; elsewhere
    (or with a relative HOME) platformdirs itself answers."""
    return _user_dir(_env(env), "XDG_CONFIG_HOME", "~/.config", "user_config_dir")


def _env(env: "Mapping[str, str] | None") -> "Mapping[str, str]":
    if env is not None:
        return env
    from .environment import process_env

    return process_env()


def _user_dir(env: "Mapping[str, str]", xdg_variable: str, linux_base: str, platformdirs_function: str) -> str:
    """platformdirs' answer for APP, computed here on Linux and macOS (an absolute $xdg_variable,
    else linux_base or ~/Library/Application Support under $HOME), from platformdirs itself
    elsewhere (which reads this process's environment)."""
    home = env.get("HOME")
    android = hasattr(sys, "getandroidapilevel") or env.get("ANDROID_DATA")
    if sys.platform in ("linux", "darwin") and not android and (home is None or home.startswith("/")):
        xdg = env.get(xdg_variable, "")
        if xdg.startswith("/"):
            return os.path.join(xdg, APP)
        base = linux_base if sys.platform == "linux" else "~/Library/Application Support"
        expanded = _expand_user(base, home)
        if expanded.startswith("/"):
            return os.path.join(expanded, APP)
    import platformdirs

    return getattr(platformdirs, platformdirs_function)(APP)


def _expand_user(path: str, home: str | None) -> str:
    """os.path.expanduser on POSIX, with `home` as $HOME (None: the password database's home
    folder, as expanduser does without a HOME). Only "~" and "~/..." are expanded here."""
    if os.name != "posix" or not (path == "~" or path.startswith("~/")):
        return os.path.expanduser(path)
    if home is None:
        import pwd

        try:
            home = pwd.getpwuid(os.getuid()).pw_dir
        except KeyError:  # no entry for this user: expanduser leaves the path as it is
            return path
    return (home.rstrip("/") + path[1:]) or "/"


def data_root_dir(env: "Mapping[str, str] | None" = None) -> str:
    """$CAIRN_HOME (with ~ expanded), else the user data folder (user_data_dir), both from `env`
    (default: environment.process_env()). Not normalised: `home.data_root()` wraps it in a Path."""
    env = _env(env)
    explicit = env.get("CAIRN_HOME")
    return _expand_user(explicit, env.get("HOME")) if explicit else user_data_dir(env)
