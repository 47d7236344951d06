"""Shared test set-up: an isolated DSPy cache, clean DSPy settings, the data folder and labels.

DSPY_CACHEDIR must be set before dspy is first imported, so a cached answer from an earlier run
can never hide a broken code path.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

_TMP_ROOT = Path(tempfile.mkdtemp(prefix="frames-dspy-tests-"))
os.environ["DSPY_CACHEDIR"] = str(_TMP_ROOT / "dspy-cache")
# Indexes and run folders go to a throwaway cache; the assembled model file is kept in the
# user's model cache (FRAMES_DSPY_MODEL_DIR) because re-assembling 0.5 GB per run is waste.
os.environ["FRAMES_DSPY_CACHE"] = str(_TMP_ROOT / "cache")

import dspy  # noqa: E402
import pytest  # noqa: E402

from frames_dspy.judge.labels import labels_file  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
# The optimize tests' helpers (opt_fake, opt_helpers) sit beside the data they use.
sys.path.insert(0, str(FIXTURES))

# The optimize tests' tiny study data (twelve two-hop questions, their corpus and index).
from opt_helpers import tiny  # noqa: E402, F401

# The frames_dspy.lm fakes' fixtures, for every test module that runs an LM.
from tests.lm_fakes import fake_llama_cpp, gguf, model_dir, real_model_path  # noqa: E402, F401

_SHARED = REPO.parent / "shared" / "data" / "raw"
if "FRAMES_DATA_DIR" not in os.environ and _SHARED.is_dir():
    os.environ["FRAMES_DATA_DIR"] = str(_SHARED)


@pytest.fixture(autouse=True)
def _clean_dspy_settings():
    """Each test starts with no LM configured and leaves none behind, and DSPy's cache in
    its default mode (a run's --cache setting is process-wide)."""
    with dspy.context(lm=None, adapter=None):
        yield
    from frames_dspy.lm.cache import RunCache

    if isinstance(dspy.cache, RunCache):
        dspy.cache.mode = "on"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real FRAMES data folder; tests marked ``real`` fail loudly if it is absent."""
    value = os.environ.get("FRAMES_DATA_DIR")
    if not value or not Path(value).is_dir():
        pytest.fail(
            "real-data tests need FRAMES_DATA_DIR pointing at a folder laid out like "
            "shared/data/raw (frames/, frames_wiki/, distractor_wiki_summaries/); "
            "run `pytest -m 'not real'` for the offline suite only"
        )
    return Path(value)


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
