"""Shared test set-up: an isolated DSPy cache, clean DSPy settings, the real data and labels.

DSPY_CACHEDIR must be set before dspy is first imported, so a cached answer from an earlier run
can never hide a broken code path. The real data is found as a user's run finds it
(:mod:`tests.real_data`), in the user's own cache; a part a test needs and cannot have here
skips it, or fails it under CI=true (:mod:`tests.needs`).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

_TMP_ROOT = Path(tempfile.mkdtemp(prefix="frames-dspy-tests-"))
os.environ["DSPY_CACHEDIR"] = str(_TMP_ROOT / "dspy-cache")
# Indexes and run folders go to a throwaway cache; the assembled model file is kept in the
# user's model cache (FRAMES_DSPY_MODEL_DIR) because re-assembling 0.5 GB per run is waste, and
# the real data in the user's own cache (kept here) because re-fetching it per run is worse.
_USER_CACHE = os.environ.get("FRAMES_DSPY_CACHE")
os.environ["FRAMES_DSPY_CACHE"] = str(_TMP_ROOT / "cache")

import dspy  # noqa: E402
import pytest  # noqa: E402

from frames_dspy.base import paths  # noqa: E402
from frames_dspy.judge.labels import labels_file  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
# The optimize tests' helpers (opt_fake, opt_helpers) sit beside the data they use.
sys.path.insert(0, str(FIXTURES))

# The optimize tests' tiny study data (twelve two-hop questions, their corpus and index).
from opt_helpers import tiny  # noqa: E402, F401

# The frames_dspy.lm fakes' fixtures, for every test module that runs an LM.
from tests.lm_fakes import fake_llama_cpp, gguf, model_dir, real_model_path  # noqa: E402, F401
from tests.needs import missing  # noqa: E402
from tests.real_data import (  # noqa: E402
    WIKI_API_ENV,
    DataUnavailable,
    RealData,
    find_real_data,
)


@pytest.fixture(autouse=True)
def _clean_dspy_settings():
    """Each test starts with no LM configured and leaves none behind, and DSPy's cache in
    its default mode (a run's --cache setting is process-wide)."""
    with dspy.context(lm=None, adapter=None):
        yield
    from frames_dspy.lm.cache import RunCache

    if isinstance(dspy.cache, RunCache):
        dspy.cache.mode = "on"


@pytest.fixture
def data(tmp_path) -> dict[str, Path]:
    """The three-question fixture (``eval_frames.csv``) and its corpus (``eval_corpus.jsonl``),
    alone in a folder of their own (no alias table or distractors): ``{"dataset", "corpus"}``."""
    folder = tmp_path / "data"
    folder.mkdir()
    paths = {"dataset": folder / "eval_frames.csv", "corpus": folder / "eval_corpus.jsonl"}
    for path in paths.values():
        shutil.copy(FIXTURES / path.name, path)
    return paths


@pytest.fixture(scope="session")
def real_data(request) -> RealData:
    """The real FRAMES questions and articles: local copy, user cache, or fetched now."""
    say = _to_terminal(request.config)
    try:
        return find_real_data(
            user_cache=_USER_CACHE, wiki_api=os.environ.get(WIKI_API_ENV), say=say
        )
    except DataUnavailable as err:
        missing(str(err))
    except ValueError as err:  # FRAMES_DATA_DIR names no folder: the user's to fix, always
        pytest.fail(str(err), pytrace=False)


@pytest.fixture(scope="session")
def local_data(request) -> RealData:
    """The real data from a local copy: the one place the distractor summaries come from."""
    if paths.data_dir() is None:
        missing(
            f"needs a local copy of the FRAMES data in {paths.DATA_DIR_ENV} (frames/, "
            "frames_wiki/, distractor_wiki_summaries/): it measures with the distractor "
            "summaries, which only a local copy has"
        )
    data = request.getfixturevalue("real_data")
    if data.distractors is None:
        missing(
            f"needs the distractor summaries (distractor_wiki_summaries/summaries_en-us.json "
            f"under {paths.DATA_DIR_ENV}={data.local}): it measures with them"
        )
    return data


def _to_terminal(config: pytest.Config):
    """Lines shown as they come, past pytest's capture: a first fetch takes minutes."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        return None

    def say(line: str) -> None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"real data: {line}")

    return say


@pytest.fixture(scope="session")
def judge_labels() -> Path:
    """The hand-labelled judge items: FRAMES_JUDGE_LABELS when set, else the project's own."""
    return labels_file()


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    """The environment for a command-line run in a subprocess: its own DSPy cache and user
    cache under ``tmp_path``, and no OpenAI key (a local server gets a placeholder)."""
    env = dict(os.environ)
    env.pop("OPENAI_API_KEY", None)
    env["DSPY_CACHEDIR"] = str(tmp_path / "dspy-cache")
    env["FRAMES_DSPY_CACHE"] = str(tmp_path / "cache")
    return env
