"""The credential judge (cairn.privacy.secret_judge): its asset, its arithmetic, its veto inside scrub, and
bench/secrets_judge.py reproducing the asset from the spent splits."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from cairn.privacy import secret_judge
from cairn.privacy.scrub import scrub

REPO = Path(__file__).resolve().parents[2]
GITHUB_TOKEN = "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"  # a GitHub token's shape: prefix, 30 characters, CRC32


@pytest.fixture
def judge_on():
    secret_judge.set_enabled(True)
    yield
    secret_judge.set_enabled(None)


def test_the_asset_loads_and_names_this_modules_features_in_order():
    model = json.loads(secret_judge.ASSET.read_text())
    assert tuple(model["features"]) == secret_judge.FEATURES
    assert len(model["coefficients"]) == len(model["mean"]) == len(model["scale"]) == len(secret_judge.FEATURES)
    assert all(s > 0 for s in model["scale"])
    assert 0 < model["threshold"] < 1
    assert "vendor" not in model["vetoable"] and set(model["vetoable"]) <= set(secret_judge.FAMILIES)
    assert {"dev", "holdout", "holdout14"} <= set(model["trained_on"])
    assert isinstance(model["enabled"], bool) and model["date"]


def test_score_is_the_logistic_of_the_standardised_dot_product():
    model = {"features": list(secret_judge.FEATURES), "intercept": -1.0,
             "coefficients": [0.0] * len(secret_judge.FEATURES), "mean": [0.0] * len(secret_judge.FEATURES),
             "scale": [1.0] * len(secret_judge.FEATURES)}
    names = list(secret_judge.FEATURES)
    model["coefficients"][names.index("entropy")] = 0.5
    model["mean"][names.index("entropy")] = 1.0
    model["scale"][names.index("entropy")] = 2.0
    vector = dict.fromkeys(names, 0.0) | {"entropy": 5.0}
    assert secret_judge.score(vector, model) == pytest.approx(1 / (1 + math.exp(-(-1.0 + 0.5 * (5.0 - 1.0) / 2.0))))


def test_a_findings_probability_is_the_shipped_assets_dot_product():
    line = "export DB_PASSWORD=Sup3rS3cr3tValue9"
    vector = secret_judge.features(line, (19, len(line)), "Secret Assignment")
    model = json.loads(secret_judge.ASSET.read_text())
    z = model["intercept"] + sum(w * (vector[n] - m) / s for n, w, m, s in
                                 zip(model["features"], model["coefficients"], model["mean"], model["scale"]))
    assert secret_judge.probability(line, (19, len(line)), "Secret Assignment") == pytest.approx(1 / (1 + math.exp(-z)))


def test_the_judge_vetoes_only_what_shows_a_stand_in(judge_on, monkeypatch):
    everything = dict(secret_judge._model(), threshold=1.01)  # every probability is below it
    monkeypatch.setattr(secret_judge, "_model", lambda: everything)
    # A value that shows a stand-in's word ("test") the rules do not read as one: in the judge's reach.
    text = "token = Kq8mZ2vX9pTq7Lm2_test"
    assert scrub(text).text == text
    secret_judge.set_enabled(False)
    assert scrub(text).text != text  # the rules alone flag it
    secret_judge.set_enabled(True)
    # Weak real passwords show no stand-in: shape alone never vetoes, whatever the threshold.
    for line, value in [("the password is hunter22 for now", "hunter22"),
                        ("export DB_PASSWORD=Sup3rS3cr3tValue9", "Sup3rS3cr3tValue9"),
                        ("the vpn password is Harbor-Tempest-2931, don't share it", "Harbor-Tempest-2931")]:
        assert value not in scrub(line).text


def test_a_vendors_key_is_never_vetoed_even_by_a_judge_that_vetoes_everything_else(judge_on, monkeypatch):
    everything = dict(secret_judge._model(), threshold=1.01)  # every probability is below it
    monkeypatch.setattr(secret_judge, "_model", lambda: everything)
    assert GITHUB_TOKEN not in scrub(f"the CI token is {GITHUB_TOKEN}").text
    line = "export DB_PASSWORD=Sup3rSecretValue9"
    assert scrub(line).text == line  # a keyword rule's finding naming a stand-in word: vetoed at that threshold


def test_a_passphrase_of_words_is_out_of_the_judges_reach():
    line = "gpg --passphrase 'violet timber basket needle umbrella' -d secrets.tar.gpg"
    start = line.index("violet")
    vector = secret_judge.features(line, (start, line.index("'", start)), "Positional Credential")
    assert secret_judge.exempt(vector)
    placeholder = secret_judge.features("password = tu_contrasena_aqui", (11, 29), "Secret Assignment")
    assert not secret_judge.exempt(placeholder)  # an identifier's underscores join no phrase


def test_the_training_script_reproduces_the_asset():
    design = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", "62ecbce^{commit}"], capture_output=True)
    if design.returncode:
        pytest.skip("the blind splits' frozen designs are not in this clone's history")
    run = subprocess.run([sys.executable, str(REPO / "bench" / "secrets_judge.py"), "--check"], capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
