# Sourced by hooks/cairn-hook and mcp/cairn-mcp: sets $data (the plugin's persistent folder) and
# $python (the runtime interpreter, empty while it is not installed or out of date).
# The runtime is ready once bootstrap.py has copied the lock it installed into the venv, and that
# copy equals this plugin version's lock.
# No dirname or mkdir processes when they are not needed: a hook runs on every prompt.
case $0 in */*) launcher_dir=${0%/*} ;; *) launcher_dir=. ;; esac
plugin_root=$(CDPATH= cd -- "$launcher_dir/.." && pwd)
data=${CLAUDE_PLUGIN_DATA:-${CAIRN_PLUGIN_DATA:-$HOME/.cairn-plugin}}
[ -d "$data" ] || mkdir -p "$data" 2>/dev/null || data=${TMPDIR:-/tmp}
python=${CAIRN_RUNTIME_PYTHON:-}
if [ -z "$python" ]; then
  # The lock's sha256, read by the `read` builtin on both sides: no process on a hook's path. A venv
  # installed before the venv kept its hash, or a hash file out of date, falls back to cmp.
  want=- have=
  [ -r "$plugin_root/engine/runtime-requirements.sha256" ] && read -r want < "$plugin_root/engine/runtime-requirements.sha256"
  [ -r "$data/venv/requirements.sha256" ] && read -r have < "$data/venv/requirements.sha256"
  for candidate in "$data/venv/bin/python" "$data/venv/Scripts/python.exe"; do
    if [ -x "$candidate" ] && { [ "$want" = "$have" ] ||
        cmp -s "$plugin_root/engine/runtime-requirements.txt" "$data/venv/requirements.txt"; }; then
      python=$candidate
      break
    fi
  done
fi
base_python=""
for name in python3 python; do
  if command -v "$name" >/dev/null 2>&1; then base_python=$name; break; fi
done
