"""frames_dspy.results.run_folder: append-only predictions that survive kills and threads.

A run resumes from ``predictions.jsonl``, so the file must hold whole lines only: one per
record, never two records interleaved, and no half line left by a killed writer.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import threading
from datetime import datetime, timedelta

import dspy
import pytest

from frames_dspy.results import records as records_module
from frames_dspy.results import run_folder
from frames_dspy.results.records import QuestionRecord, read_records
from frames_dspy.results.run_folder import (
    RunFolder,
    environment_record,
    package_versions,
    setting_differences,
)


def rec(condition, qid, **fields) -> QuestionRecord:
    return QuestionRecord(condition=condition, id=qid, **fields)


def lines_of(run: RunFolder) -> list[str]:
    return run.predictions.read_text(encoding="utf-8").splitlines()


def test_run_folder_append_and_done(tmp_path):
    run = RunFolder(tmp_path / "run")
    run.append(rec("naive", 3, answer="x"))
    run.append(rec("oracle", "4", answer="y"))
    assert run.done() == {("naive", 3), ("oracle", 4)}
    with run.predictions.open("a") as handle:
        handle.write('{"condition": "naive", "id"')
    reopened = RunFolder(tmp_path / "run")
    assert reopened.done() == {("naive", 3), ("oracle", 4)}
    reopened.append(rec("naive", 5))
    assert [json.loads(line)["id"] for line in lines_of(reopened)] == [3, "4", 5]
    reopened.write_json("extra.json", {"a": 1})
    assert json.loads((reopened.path / "extra.json").read_text()) == {"a": 1}
    assert not (reopened.path / "extra.json.tmp").exists()


def test_append_writes_one_line_per_record_and_syncs_it(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(records_module.os, "fsync", fsync)
    run = RunFolder(tmp_path / "run")
    assert not run.predictions.exists()  # created by the first append, not by opening
    records = [
        rec("naive", 0, answer="line one\nline two", packing={"path": tmp_path}),
        rec("naive", 1, answer="Zürich – 東京", queries=[["a", "b"]]),
    ]
    for n, record in enumerate(records, start=1):
        run.append(record)
        # On disk (a fresh read) before append returns, and synced once per record.
        assert len(lines_of(run)) == n
        assert len(synced) == n
    first, second = (json.loads(line) for line in lines_of(run))
    assert first["answer"] == "line one\nline two"
    assert first["packing"]["path"] == str(tmp_path)  # anything JSON lacks is written as text
    assert second["answer"] == "Zürich – 東京"
    assert "東京" in run.predictions.read_text(encoding="utf-8")  # kept readable, not \u-escaped
    records[0].packing = {"path": str(tmp_path)}
    assert run.records() == records


def test_a_failed_append_leaves_no_half_line(tmp_path, monkeypatch):
    run = RunFolder(tmp_path / "run")
    run.append(rec("naive", 0, answer="kept"))
    real_write = os.write

    def half_then_full(fd, data):
        if len(data) > 20:  # half a line lands, then the disk is full
            real_write(fd, data[: len(data) // 2])
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(records_module.os, "write", half_then_full)
    with pytest.raises(OSError) as info:
        run.append(rec("naive", 1, answer="lost"))
    assert info.value.errno == 28 and info.value.filename == str(run.predictions)
    monkeypatch.undo()
    assert run.predictions.read_bytes().endswith(b"\n")  # cut back to the whole lines
    run.append(rec("naive", 1, answer="written on the rerun"))
    assert [r.answer for r in run.records()] == ["kept", "written on the rerun"]


def test_concurrent_appends_never_interleave(tmp_path):
    run = RunFolder(tmp_path / "run")
    threads, per_thread = 16, 25
    start = threading.Barrier(threads)

    def writer(t: int) -> None:
        start.wait()
        for i in range(per_thread):
            # Lines longer than a write buffer go out in several writes: without the lock (or with
            # a record written in pieces) other threads' lines would land between them.
            run.append(rec(f"t{t}", i, answer=f"{t}-{i}-" + "x" * 20_000))

    workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    lines = lines_of(run)
    assert len(lines) == threads * per_thread
    records = [json.loads(line) for line in lines]  # every line is one whole record
    assert all(r["answer"].startswith(f"{r['condition'][1:]}-{r['id']}-") for r in records)
    assert run.done() == {(f"t{t}", i) for t in range(threads) for i in range(per_thread)}


def test_opening_repairs_a_torn_last_line(tmp_path, caplog):
    folder = tmp_path / "run"
    folder.mkdir()
    whole = '{"condition": "naive", "id": 0}\n{"condition": "naive", "id": 1}\n'
    (folder / "predictions.jsonl").write_text(whole + '{"condition": "nai', encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="frames_dspy.results.records"):
        run = RunFolder(folder)
    assert run.predictions.read_text(encoding="utf-8") == whole
    assert "incomplete last line" in caplog.text
    run.append(rec("naive", 2))
    assert [r.id for r in run.records()] == [0, 1, 2]


def test_opening_leaves_a_whole_file_alone_and_empties_a_lone_torn_line(tmp_path, caplog):
    whole = tmp_path / "whole"
    whole.mkdir()
    text = '{"condition": "naive", "id": 0}\n'
    (whole / "predictions.jsonl").write_text(text, encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="frames_dspy.results.records"):
        RunFolder(whole)
    assert (whole / "predictions.jsonl").read_text(encoding="utf-8") == text
    assert caplog.records == []

    torn = tmp_path / "torn"
    torn.mkdir()
    (torn / "predictions.jsonl").write_text('{"condition": "na', encoding="utf-8")
    run = RunFolder(torn)
    assert run.predictions.read_bytes() == b""
    assert run.done() == set()


def test_read_records_names_a_corrupt_middle_line(tmp_path):
    path = tmp_path / "predictions.jsonl"
    path.write_text(
        '{"condition": "c", "id": 0}\n{"id": 1, oops}\n{"condition": "c", "id": 2}\n',
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match="line 2 is not valid JSON") as info:
        read_records(path)
    assert str(path) in str(info.value)
    # RunFolder does not hide it either: only a torn *last* line is repaired.
    with pytest.raises(ValueError, match="line 2"):
        RunFolder(tmp_path).done()


def test_read_records_skips_blank_lines_and_a_torn_tail(tmp_path, caplog):
    path = tmp_path / "predictions.jsonl"
    assert read_records(path) == []  # no file yet: nothing recorded
    path.write_text(
        '{"condition": "c", "id": 0}\n\n{"condition": "c", "id": 1}\n{"id": 2, "ans',
        encoding="utf-8",
    )
    with caplog.at_level(logging.WARNING, logger="frames_dspy.results.records"):
        assert read_records(path) == [rec("c", 0), rec("c", 1)]
    assert "ignoring an incomplete last line" in caplog.text


def test_json_files_of_the_folder(tmp_path):
    run = RunFolder(tmp_path / "a" / "b")
    assert run.path.is_dir()
    assert run.read_json("config.json") is None
    run.write_json("config.json", {"settings": {"rounds": 2}})
    run.write_json("config.json", {"settings": {"rounds": 3}})
    assert run.read_json("config.json") == {"settings": {"rounds": 3}}
    assert sorted(p.name for p in run.path.iterdir()) == ["config.json"]


def test_setting_differences_lists_only_the_changed_keys_in_order():
    previous = {"model": "local", "rounds": 2, "k": 3, "seed": 0}
    current = {"model": "local", "rounds": 3, "k": 3, "seed": 1, "threads": 8}
    keys = ["seed", "model", "rounds", "retriever", "k"]
    assert setting_differences(previous, current, keys) == ["seed: 0 -> 1", "rounds: 2 -> 3"]
    # A key one side lacks counts as None; keys not asked about never count.
    assert setting_differences({}, {"retriever": "bm25s"}, keys) == ["retriever: None -> 'bm25s'"]
    assert setting_differences(previous, current, ["threads"]) == ["threads: None -> 8"]
    assert setting_differences(previous, dict(previous), keys) == []
    # A key added since the old run counts as the default it ran with.
    added = setting_differences({}, {"judge_max_tokens": 256}, ["judge_max_tokens"],
                                defaults={"judge_max_tokens": 256})  # fmt: skip
    assert added == []


def test_environment_record_names_versions_python_and_a_utc_start():
    record = environment_record()
    assert set(record) == {"packages", "python", "started"}
    assert record["packages"]["dspy"] == dspy.__version__
    assert record["packages"]["frames-dspy"] == "0.1.0"
    assert record["python"] == platform.python_version()
    started = datetime.fromisoformat(record["started"])
    assert started.utcoffset() == timedelta(0)
    assert started.microsecond == 0  # seconds precision, as written to config.json


def test_package_versions_skips_packages_that_are_not_installed(monkeypatch):
    monkeypatch.setattr(run_folder, "_PACKAGES", ("dspy", "surely-not-installed-frames-pkg"))
    assert package_versions() == {"dspy": dspy.__version__}
