"""`cairn remember` / `cairn recall` as whole processes: they use the warm process's model when it is
up, start it when it is not, and never import sentence-transformers themselves for the default model
(its ONNX backend loads in-process in well under a second)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from cairn.adapters.warm import client as warm

from tests.conftest import git_init, wait_for

RUN = ("import sys, json\n"
       "from cairn.adapters.cli import main\n"
       "try:\n    main(sys.argv[1:])\nexcept SystemExit as exc:\n    code = exc.code or 0\nelse:\n    code = 0\n"
       "print(json.dumps({'code': code, 'model_imported': 'sentence_transformers' in sys.modules,\n"
       "                  'engine_imported': 'cairn.memories.engine' in sys.modules}), file=sys.stderr)\n")


def _cairn(project, *args: str) -> tuple[dict, str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CAIRN_NO_WARM", "CAIRN_STORE")}
    env.update(HF_HUB_OFFLINE="1", CAIRN_SERVICE_IDLE_SECONDS="120")
    out = subprocess.run([sys.executable, "-c", RUN, *args], cwd=project, env=env, capture_output=True, text=True,
                         timeout=300)
    *lines, last = out.stderr.strip().splitlines()
    return json.loads(last), out.stdout, "\n".join(lines)


def test_remember_and_recall_go_through_the_warm_process(project, cairn_home, tmp_path):
    assert not warm.is_running()
    try:
        done, out, err = _cairn(project, "remember", "Deploys go through blue-green on Fly", "--json")
        assert done["code"] == 0 and not done["model_imported"] and json.loads(out)["status"] == "created"
        assert err == ""  # not a terminal: no loading notice
        wait_for(lambda: warm.socket_path().exists(), what="the warm process's socket")
        done, out, err = _cairn(project, "recall", "how do we deploy?", "--json")
        # The warm process answered the whole recall: this process imported neither the model nor the engine.
        assert done == {"code": 0, "model_imported": False, "engine_imported": False}, err
        hits = json.loads(out)
        assert hits and "vector" in hits[0]["reasons"]  # hybrid: the query was embedded, by the warm process
        done, out, err = _cairn(project, "recall", "how do we deploy?")
        assert done["code"] == 0 and "Deploys go through blue-green on Fly" in out and "vector #1" in out
        # Tags are split before the request: the warm process filters by each of them.
        done, out, err = _cairn(project, "recall", "how do we deploy?", "--tag", "ops,unused", "--json")
        assert done == {"code": 0, "model_imported": False, "engine_imported": False} and json.loads(out) == [], err
        done, _, err = _cairn(project, "recall", "deploy", "--store", "no-such-store")
        assert done["code"] == 2 and "'no-such-store' does not exist" in err
        done, out, _ = _cairn(project, "recall", "how do we deploy?", "--keyword-only", "--json")
        assert done["code"] == 0 and not done["model_imported"] and "vector" not in json.loads(out)[0]["reasons"]
        # A project with no store of its own still sees the global store (found by a new user: the warm
        # process answered "no memories match" there, the in-process CLI found the preference).
        done, _, _ = _cairn(project, "remember", "I prefer tabs over spaces in Makefiles", "--kind", "preference",
                            "--scope", "global")
        assert done["code"] == 0
        fresh = git_init(tmp_path / "fresh-project")
        for scope in ("global", "all"):
            done, out, err = _cairn(fresh, "recall", "tabs or spaces in a Makefile", "--scope", scope, "--json")
            assert done["code"] == 0, err
            assert [h["memory"]["text"] for h in json.loads(out)][:1] == ["I prefer tabs over spaces in Makefiles"]
        assert not any(cairn_home.glob("stores/fresh-project*"))  # a read created no store
    finally:
        warm.request({"op": "shutdown"})
        wait_for(lambda: not warm.is_running(), what="the warm process to exit")
