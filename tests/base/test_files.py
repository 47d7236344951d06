"""frames_dspy.base.files: atomic writes leave the old file or the new one, never a torn one."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from frames_dspy.base.files import atomic_write_json, atomic_write_text, sha256_bytes, sha256_file


def test_atomic_json_round_trip_and_mode(tmp_path):
    target = tmp_path / "sub" / "config.json"
    atomic_write_json(target, {"a": 1, "path": tmp_path})
    assert json.loads(target.read_text()) == {"a": 1, "path": str(tmp_path)}
    assert oct(os.stat(target).st_mode & 0o777) == "0o644"
    assert [p.name for p in target.parent.iterdir()] == ["config.json"]


def test_failed_write_keeps_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "x.json"
    atomic_write_json(target, {"old": True})

    class Unserialisable:
        def __str__(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        atomic_write_json(target, {"new": Unserialisable()})
    assert json.loads(target.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_text_write_replaces(tmp_path):
    target = tmp_path / "t.txt"
    atomic_write_text(target, "one")
    atomic_write_text(target, "two")
    assert target.read_text() == "two"


def test_hashes_match_hashlib(tmp_path):
    data = b"frames" * 1000
    path = tmp_path / "blob"
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()
    assert sha256_bytes(data) == sha256_bytes(data.decode()) == hashlib.sha256(data).hexdigest()
