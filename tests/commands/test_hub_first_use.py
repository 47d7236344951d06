"""The main command's network paths against a server that answers like the Hugging Face hub.

``python -m frames_dspy.evaluate`` runs in a subprocess as a user runs it, with ``HF_ENDPOINT``
pointing at ``tests/hub_server.py`` (a ``google/frames-benchmark`` whose ``test.tsv`` holds the
eval fixture's questions, and a ``wikimedia/wikipedia``-shaped repo holding their articles among
generated ones) and no data folder: the questions are downloaded on first use, ``--corpus
wikipedia:<config>`` is pinned to a commit, indexed and searched, and the run records the commit.
The model is ``tests/fault_server.py`` with no faults. Offline, the same command reuses what the
first run left; a config the hub lacks is one line and exit status 2.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from frames_dspy.data.questions import dataset_fingerprint, load_frames
from tests.fault_server import FaultServer, evaluate_command
from tests.hub_server import (
    FRAMES,
    WIKIPEDIA,
    HubServer,
    frames_files,
    hub_env,
    wikipedia_files,
)

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parents[1] / "fixtures"
CONFIG = "20231101.xx"


@pytest.fixture
def hub():
    with HubServer(lifetime=300) as server:
        server.commit(FRAMES, frames_files(), "initial")
        server.commit(WIKIPEDIA, wikipedia_files({CONFIG: 600}), "initial")
        yield server


@pytest.fixture
def model():
    with FaultServer(p_500=0, p_429=0, p_stall=0, lifetime=300) as server:
        yield server


@pytest.fixture
def user(tmp_path, env, hub) -> dict[str, str]:
    """A fresh machine: no data folder, empty caches, the hub client pointed at ``hub``."""
    env = hub_env(tmp_path, hub, env, OPENAI_API_KEY="placeholder")
    env.pop("FRAMES_DATA_DIR", None)
    return env


def evaluate(env: dict, model: FaultServer, out: Path, *args: str):
    command = evaluate_command(model, "--conditions", "bm25-2,oracle", "--out", str(out), *args)
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=REPO)


def test_first_use_downloads_the_questions_and_pins_indexes_and_searches_the_snapshot(
    tmp_path, hub, model, user
):
    sha = hub.sha(WIKIPEDIA)
    done = evaluate(
        user, model, tmp_path / "run", "--corpus", f"wikipedia:{CONFIG}", "--limit", "2"
    )
    assert done.returncode == 0, done.stderr
    assert f"wikimedia/wikipedia {CONFIG}: main is commit {sha}" in done.stderr
    assert f"indexing wikipedia:{CONFIG}@{sha} into" in done.stderr
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["settings"]["corpus"] == f"wikipedia:{CONFIG}@{sha}"
    assert config["corpus_index"]["revision"] == sha
    assert config["corpus_index"]["identity"]["snapshot"]["revision"] == sha
    assert config["corpus_index"]["articles"] == 600
    # The questions came from the hub's test.tsv: the fixture's, the first two run.
    assert config["dataset_sha256"] == dataset_fingerprint(
        load_frames(FIXTURES / "eval_frames.csv")
    )
    assert any(path.endswith("/test.tsv") for _, path, _ in hub.counts.requests)
    records = [json.loads(x) for x in (tmp_path / "run" / "predictions.jsonl").open()]
    assert sorted((r["condition"], r["id"]) for r in records) == [
        ("bm25-2", 0),
        ("bm25-2", 1),
        ("oracle", 0),
        ("oracle", 1),
    ]
    assert all(r["recall"] == [1.0] for r in records if r["condition"] == "oracle")
    table = (tmp_path / "run" / "table.md").read_text()
    assert f"CORPUS: wikipedia:{CONFIG}@{sha} (600 articles" in table

    # Offline, the same command works from what the first run left, without one request.
    asked = len(hub.counts.requests)
    offline = {**user, "HF_HUB_OFFLINE": "1"}
    again = evaluate(offline, model, tmp_path / "run2", "--corpus", f"wikipedia:{CONFIG}")
    assert again.returncode == 0, again.stderr
    assert f"wikipedia:{CONFIG} is wikimedia/wikipedia {CONFIG} at commit {sha}" in again.stderr
    assert len(hub.counts.requests) == asked
    config = json.loads((tmp_path / "run2" / "config.json").read_text())
    assert config["settings"]["corpus"] == f"wikipedia:{CONFIG}@{sha}"


def test_a_config_the_hub_lacks_is_one_line_and_exit_2(tmp_path, model, user):
    done = evaluate(
        user,
        model,
        tmp_path / "run",
        "--corpus",
        "wikipedia:20231101.zz",
        "--dataset",
        str(FIXTURES / "eval_frames.csv"),
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = [x for x in done.stderr.splitlines() if "20231101.zz" in x]
    assert "wikimedia/wikipedia has no snapshot '20231101.zz' at commit" in line
    assert "such as '20231101.en'" in line


def test_a_hub_that_cannot_be_reached_is_one_line_and_exit_2(tmp_path, model, user, hub):
    hub.close()  # nothing listens there any more
    done = evaluate(
        user,
        model,
        tmp_path / "run",
        "--corpus",
        f"wikipedia:{CONFIG}",
        "--dataset",
        str(FIXTURES / "eval_frames.csv"),
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()[-1:]
    assert "could not download the commit of wikimedia/wikipedia@main" in line
    assert "the connection was refused" in line
    assert "--corpus wikipedia:CONFIG@COMMIT" in line and "--corpus PATH" in line
