"""optimize.storage: database URLs, redacted passwords, seeded samplers, and a study that
resumes only with the settings it was made with.
"""

from __future__ import annotations

import pytest
from opt_helpers import (
    quiet_optuna,  # noqa: F401 (an autouse fixture)
    run_tiny,
)


def test_storage_url_must_be_a_database_url(tiny, tmp_path):
    with pytest.raises(ValueError, match="not a database URL"):
        run_tiny(tiny, tmp_path, storage="study.db")


def test_a_study_made_with_other_settings_is_not_resumed(tiny, tmp_path):
    run_tiny(tiny, tmp_path, trials=1, test_limit=1)
    with pytest.raises(ValueError, match="other settings.*context_tokens"):
        run_tiny(tiny, tmp_path, trials=1, test_limit=1, context_tokens=500)
