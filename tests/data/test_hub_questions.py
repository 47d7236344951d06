"""The questions' ``test.tsv`` downloaded from a server that answers like the Hugging Face hub.

``load_frames`` runs in a subprocess with ``HF_ENDPOINT`` pointing at ``tests/hub_server.py``
(read when ``huggingface_hub`` is imported, as for a user), so the real ``hf_hub_download`` asks
it. The whole first run is in ``tests/commands/test_hub_first_use.py``; this file is about the
failures: the hub client retries a failing request five times within seconds; a hub that fails
longer than that is tried again by ``frames_dspy.data.hub``, and one that keeps failing is one
line naming the fixes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from frames_dspy.data.questions import dataset_fingerprint, load_frames
from tests.hub_server import FRAMES, HubServer, frames_files, hub_env

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parents[1] / "fixtures"
# Prints the questions' fingerprint, or the error's kind and message; our retries wait 0.1 s.
_LOAD = """
import sys
from frames_dspy.data import hub
from frames_dspy.data.questions import dataset_fingerprint, load_frames
hub.RETRY_WAITS = (0.1, 0.1)
try:
    print("OK", dataset_fingerprint(load_frames(sys.argv[1], revision=sys.argv[2] or None)))
except Exception as err:
    print("ERROR", type(err).__name__, err)
"""


@pytest.fixture
def frames_hub():
    with HubServer(lifetime=120) as server:
        server.commit(FRAMES, frames_files(), "initial")
        yield server


def load(tmp_path: Path, server: HubServer, repo: str = FRAMES, revision: str = "") -> str:
    env = hub_env(tmp_path, server)
    argv = [sys.executable, "-c", _LOAD, repo, revision]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    (line,) = [x for x in done.stdout.splitlines() if x.startswith(("OK ", "ERROR "))] or [
        done.stderr
    ]
    return line


def expected() -> str:
    return "OK " + dataset_fingerprint(load_frames(FIXTURES / "eval_frames.csv"))


def test_the_questions_download_on_first_use_and_come_from_the_cache_after(tmp_path, frames_hub):
    assert load(tmp_path, frames_hub) == expected()
    served = frames_hub.counts.bytes[f"{FRAMES}/test.tsv"]
    assert served == len(frames_hub.repos[FRAMES][-1].files["test.tsv"])
    frames_hub.close()  # the hub gone: the cached copy is used
    assert load(tmp_path, frames_hub) == expected()


@pytest.mark.parametrize(
    "fault",
    [
        # Seven failures: one more than the hub client's own try and five retries.
        pytest.param(lambda s: s.fail(503, times=7, match="test.tsv"), id="503"),
        pytest.param(lambda s: s.fail(429, times=7, match="test.tsv"), id="429"),
        pytest.param(lambda s: s.drop(10, times=1, match="test.tsv"), id="dropped"),
    ],
)
def test_a_failing_first_download_is_retried(tmp_path, frames_hub, fault):
    fault(frames_hub)
    assert load(tmp_path, frames_hub) == expected()
    assert sum(frames_hub.counts.faults.values()) >= 1


def test_a_hub_that_keeps_failing_is_one_line_naming_the_fixes(tmp_path, frames_hub):
    frames_hub.fail(503, times=100, match="test.tsv")
    message = load(tmp_path, frames_hub)
    assert message.startswith(
        "ERROR DownloadError could not download the FRAMES questions (hub dataset "
        f"google/frames-benchmark, file test.tsv) from {frames_hub.endpoint}: the server "
        "answered HTTP 503"
    )
    assert "--dataset" in message and "FRAMES_DATA_DIR" in message


def test_a_missing_repo_or_revision_is_a_dataset_error(tmp_path, frames_hub):
    message = load(tmp_path, frames_hub, "someone/not-there")
    assert message.startswith("ERROR DatasetError hub dataset 'someone/not-there' (revision main)")
    message = load(tmp_path, frames_hub, FRAMES, "nosuchbranch")
    assert "(revision nosuchbranch) has no test.tsv" in message
    assert len(frames_hub.counts.requests) == 2  # each answered at once, not retried
