"""What a test does when a part it needs is not on this machine: one rule, kept here.

Some tests need a part the offline suite cannot fake: the real FRAMES data, the embedded model,
Debian's headless Chromium, a PostgreSQL server. Where the part is missing, such a test calls
:func:`missing` with one line that names it, why the test needs it and how to get it. On a
user's machine the test is then skipped with that line (``pytest -ra`` lists it at the end); with
``CI=true`` it fails with it, because CI (``.ci/run``) provides every part, and a skip there
would hide a broken set-up behind a green run.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

#: The variable CI services set (``CI=true``); ``.ci/run`` sets it too.
CI_ENV = "CI"


def under_ci() -> bool:
    """Whether this run is CI's: ``CI`` is ``true`` (or ``1``, ``yes``)."""
    return os.environ.get(CI_ENV, "").strip().lower() in {"true", "1", "yes"}


def missing(what: str) -> NoReturn:
    """Skip the test with ``what`` (one line: the part, why, how to get it); fail under CI."""
    line = " ".join(what.split())
    if under_ci():
        pytest.fail(f"{line} [{CI_ENV}=true: CI must provide it]", pytrace=False)
    pytest.skip(line)
