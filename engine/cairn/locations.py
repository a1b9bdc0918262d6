"""The data root as a string, with the standard library's `os` and `sys` only.

The hook process computes the warm process's socket path from the data root before it does
anything else, within a budget of milliseconds: importing platformdirs (and the pathlib, tempfile,
re it pulls in) costs more than the whole request. So the one answer platformdirs gives Cairn,
the user data folder, is replicated here for Linux and macOS; any other platform (and the odd
environment this does not cover) asks platformdirs. `home.data_root()` is built on this function,
so the hook and the engine cannot disagree, and tests/adapters/test_lean_hook.py checks it against
platformdirs' own answer.
"""

import os
import sys

APP = "cairn"


def user_data_dir() -> str:
    """platformdirs.user_data_dir("cairn"): `$XDG_DATA_HOME/cairn` when that is an absolute path,
    else `~/.local/share/cairn` on Linux and `~/Library/Application Support/cairn` on macOS (both
    platforms honour XDG_DATA_HOME in platformdirs 4). Elsewhere, or when HOME is set but not
    absolute (platformdirs then asks the password database), platformdirs itself answers."""
    return _user_dir("XDG_DATA_HOME", "~/.local/share", "user_data_dir")


def user_config_dir() -> str:
    """platformdirs.user_config_dir("cairn"): `$XDG_CONFIG_HOME/cairn` when that is an absolute path,
    else `~/.config/cairn` on Linux and `~/Library/Application Support/cairn` on macOS; elsewhere
    (or with a relative HOME) platformdirs itself answers."""
    return _user_dir("XDG_CONFIG_HOME", "~/.config", "user_config_dir")


def _user_dir(xdg_variable: str, linux_base: str, platformdirs_function: str) -> str:
    """platformdirs' answer for APP, computed here on Linux and macOS (an absolute $xdg_variable,
    else linux_base or ~/Library/Application Support), from platformdirs itself elsewhere."""
    home = os.environ.get("HOME")
    android = hasattr(sys, "getandroidapilevel") or os.environ.get("ANDROID_DATA")
    if sys.platform in ("linux", "darwin") and not android and (home is None or home.startswith("/")):
        xdg = os.environ.get(xdg_variable, "")
        if xdg.startswith("/"):
            return os.path.join(xdg, APP)
        base = linux_base if sys.platform == "linux" else "~/Library/Application Support"
        expanded = os.path.expanduser(base)
        if expanded.startswith("/"):
            return os.path.join(expanded, APP)
    import platformdirs

    return getattr(platformdirs, platformdirs_function)(APP)


def data_root_dir() -> str:
    """$CAIRN_HOME (with ~ expanded), else the user data folder (user_data_dir). Not normalised:
    `home.data_root()` wraps it in a Path."""
    explicit = os.environ.get("CAIRN_HOME")
    return os.path.expanduser(explicit) if explicit else user_data_dir()
