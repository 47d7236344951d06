"""Naming a hub snapshot at a revision, pinning it, and what counts as a failure worth a retry.

In-process and offline: the hub is never asked here (``tests/retrieval/test_hub_build.py`` asks
a local server that answers like it). Pinning is checked with the hub reported unreachable.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from frames_dspy.data import hub, snapshot
from frames_dspy.data.corpus import CorpusError
from frames_dspy.data.download import DownloadError
from frames_dspy.data.snapshot import HUB_DATASET, Snapshot, parse_snapshot, pin_snapshot

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class HTTPFailure(Exception):
    """An error carrying a response, as the hub client's HTTP errors do."""

    def __init__(self, status: int, headers: dict | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.response = SimpleNamespace(status_code=status, headers=headers or {})


# --- naming ------------------------------------------------------------------------------------


def test_a_revision_after_at_names_a_commit_or_a_branch():
    pinned = parse_snapshot(f"wikipedia:20231101.en@{COMMIT}")
    assert pinned.config == "20231101.en" and pinned.revision == COMMIT and pinned.pinned
    branch = parse_snapshot("wikipedia:20231101.en@main")
    assert branch.revision == "main" and not branch.pinned
    plain = parse_snapshot("wikipedia")
    assert plain.revision is None and not plain.pinned
    assert plain.at(COMMIT).name == f"wikipedia:20231101.en@{COMMIT}"
    assert plain.at(COMMIT).identity() == {
        "dataset": HUB_DATASET,
        "config": "20231101.en",
        "revision": COMMIT,
    }
    # Two commits, two indexes; local files are pinned by what they are.
    assert plain.at(COMMIT).key() != plain.at("f" * 40).key()


@pytest.mark.parametrize(
    "value",
    ["wikipedia:20231101.en@", "wikipedia:20231101.en@two words", "wikipedia:20231101.en@a..b"],
)
def test_a_malformed_revision_names_the_fix(value):
    with pytest.raises(CorpusError) as info:
        parse_snapshot(value)
    assert repr(value) in str(info.value)
    assert "20231101.en" in str(info.value) or "commit hash (40 hex digits)" in str(info.value)


def test_a_malformed_revision_says_what_a_revision_is():
    with pytest.raises(
        CorpusError, match=r"'two words' is not a revision; after '@' give a commit"
    ):
        parse_snapshot("wikipedia:20231101.en@two words")


# --- pinning without the network ---------------------------------------------------------------


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setattr(hub, "unreachable_reason", lambda: "no network here")


def test_a_commit_needs_no_network_and_a_plain_name_uses_the_remembered_one(tmp_path, offline):
    pins = tmp_path / "pinned-revisions.json"
    pinned = parse_snapshot(f"wikipedia:20231101.en@{COMMIT}")
    assert pin_snapshot(pinned, pins=pins) is pinned
    pins.write_text(
        json.dumps(
            {f"{HUB_DATASET} 20231101.en": {"revision": COMMIT, "from": "main", "resolved": "x"}}
        )
    )
    notes = []
    got = pin_snapshot(parse_snapshot("wikipedia"), pins=pins, say=notes.append)
    assert got.revision == COMMIT and got.name == f"wikipedia:20231101.en@{COMMIT}"
    (note,) = notes
    assert f"at commit {COMMIT}, resolved from main" in note and "add @main" in note


def test_offline_with_nothing_remembered_is_one_line_naming_the_fixes(tmp_path, offline):
    pins = tmp_path / "pinned-revisions.json"
    for value in ("wikipedia", "wikipedia:20231101.en@main"):
        with pytest.raises(DownloadError) as info:
            pin_snapshot(parse_snapshot(value), pins=pins)
        message = str(info.value)
        assert "could not download the commit of wikimedia/wikipedia@main" in message
        assert "no network here" in message and "--corpus wikipedia:CONFIG@COMMIT" in message
        assert "\n" not in message
    # A branch named explicitly is resolved, never taken from the record.
    pins.write_text(json.dumps({f"{HUB_DATASET} 20231101.en": {"revision": COMMIT}}))
    with pytest.raises(DownloadError):
        pin_snapshot(parse_snapshot("wikipedia:20231101.en@main"), pins=pins)


def test_local_files_are_pinned_already(tmp_path):
    local = Snapshot(str(tmp_path / "a.parquet"), files=(tmp_path / "a.parquet",))
    assert local.pinned and pin_snapshot(local, pins=tmp_path / "p.json") is local


# --- what is worth a retry ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "worth"),
    [
        (HTTPFailure(429), True),
        (HTTPFailure(503), True),
        (HTTPFailure(500), True),
        (HTTPFailure(404), False),
        (HTTPFailure(401), False),
        (ConnectionResetError("reset"), True),
        (TimeoutError("slow"), True),
        (ValueError("BuilderConfig 'x' not found"), False),
    ],
)
def test_transient_failures(error, worth):
    assert hub.transient(error) is worth
    wrapped = RuntimeError("while reading")
    wrapped.__cause__ = error
    assert hub.transient(wrapped) is worth


def test_a_retry_after_longer_than_planned_is_obeyed_up_to_a_cap():
    assert hub.retry_wait(HTTPFailure(429, {"Retry-After": "30"}), 5.0) == 30.0
    assert hub.retry_wait(HTTPFailure(429, {"Retry-After": "1"}), 5.0) == 5.0
    assert hub.retry_wait(HTTPFailure(429, {"Retry-After": "99999"}), 5.0) == hub.MAX_RETRY_AFTER
    assert hub.retry_wait(HTTPFailure(503), 5.0) == 5.0


def test_retrying_retries_network_failures_only_and_gives_up(monkeypatch):
    monkeypatch.setattr(hub.time, "sleep", lambda seconds: None)
    failures = [HTTPFailure(503), ConnectionResetError("reset")]

    def flaky():
        if failures:
            raise failures.pop(0)
        return "done"

    assert hub.retrying("asking", flaky, waits=(1.0, 1.0)) == "done"
    calls = []

    def broken():
        calls.append(1)
        raise HTTPFailure(404)

    with pytest.raises(HTTPFailure):
        hub.retrying("asking", broken, waits=(1.0, 1.0))
    assert len(calls) == 1  # a missing file is not retried
    calls.clear()

    def down():
        calls.append(1)
        raise HTTPFailure(502)

    with pytest.raises(HTTPFailure):
        hub.retrying("asking", down, waits=(1.0, 1.0))
    assert len(calls) == 3


def test_the_stream_of_a_hub_snapshot_is_retried_from_its_last_position(monkeypatch):
    """A failure after two batches: the stream is opened again at the second batch's end."""
    monkeypatch.setattr(snapshot.time, "sleep", lambda seconds: None)
    monkeypatch.setattr(hub, "RETRY_WAITS", (0.0, 0.0))
    starts = []

    def read(source, start, batch_size):
        starts.append(start.rows)
        for rows in range(start.rows + batch_size, 61, batch_size):
            if rows == 30 and len(starts) == 1:
                raise ConnectionResetError("cut")
            yield {"id": [str(rows)]}, snapshot.Position(rows, {"at": rows}, "f")

    monkeypatch.setattr(snapshot, "_read", read)
    source = parse_snapshot("wikipedia").at(COMMIT)
    got = [p.rows for _, p in snapshot.stream_batches(source, batch_size=10)]
    assert got == [10, 20, 30, 40, 50, 60] and starts == [0, 20]
