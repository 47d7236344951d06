"""A full disk, a read-only file system, no permission: one line, the right exit status, and
the next run resumes.

The fast tests inject the ``OSError`` the kernel gives (into the one ``os.write`` of an
appended record, or the rename of a report file) and go through ``evaluate.main`` with
DummyLMs. The last test fills a real tmpfs (mounted in a user and mount namespace of its
own, where the system allows one) under real ``python -m frames_dspy.evaluate`` processes.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from frames_dspy.base import files
from frames_dspy.results import records as records_module
from tests.commands.test_evaluate import (  # noqa: F401 (no_real_lm: a fixture)
    call_main,
    data_argv,
    no_real_lm,
)
from tests.commands.test_faults import _data, _records
from tests.fault_server import FaultServer, evaluate_command

WHY = {
    errno.ENOSPC: ("no space left on the device", "free some space"),
    errno.EACCES: ("permission denied", "make it writable for this user"),
    errno.EROFS: ("the file system is read-only", "make it writable"),
}


def _argv(data, out: Path, conditions: str = "naive,oracle") -> list[str]:
    return ["--conditions", conditions, *data_argv(data, out)]


def _error_lines(err: str) -> list[str]:
    assert "Traceback" not in err, err
    return [line for line in err.splitlines() if line.startswith("error:")]


def _keys(out: Path) -> Counter:
    return Counter((r["condition"], r["id"]) for r in _records(out))


@pytest.mark.parametrize("code", sorted(WHY))
def test_a_failed_append_mid_run_is_one_line_and_the_rerun_finishes(
    data,
    no_real_lm,  # noqa: F811
    capsys,
    tmp_path,
    monkeypatch,
    code,
):
    out = tmp_path / "run"
    real_write = os.write
    appended = []

    def write(fd, payload):
        if len(appended) == 2:  # the third record finds the disk full
            raise OSError(code, os.strerror(code))
        appended.append(payload)
        return real_write(fd, payload)

    monkeypatch.setattr(records_module.os, "write", write)
    status, _, err = call_main(_argv(data, out), capsys)
    why, fix = WHY[code]
    predictions = out / "predictions.jsonl"
    assert status == 3
    assert _error_lines(err) == [
        f"error: cannot write {predictions}: {why}. 2 of 6 questions are recorded in "
        f"{predictions}; {fix}, then rerun the same command (--out {out}) to run the other 4"
    ]
    assert sum(_keys(out).values()) == 2

    # Space freed: the same command resumes and finishes. (Not monkeypatch.undo(): that would
    # undo no_real_lm too, and the rerun would load the embedded model.)
    monkeypatch.setattr(records_module.os, "write", real_write)
    status, _, err = call_main(_argv(data, out), capsys)
    assert status == 0, err
    keys = _keys(out)
    assert len(keys) == 6 and set(keys.values()) == {1}
    assert json.loads((out / "summary.json").read_text())["oracle"]["n"] == 3


def test_a_full_disk_while_writing_the_report_keeps_the_old_one(
    data,
    no_real_lm,  # noqa: F811
    capsys,
    tmp_path,
    monkeypatch,
):
    out = tmp_path / "run"
    assert call_main(_argv(data, out, "naive"), capsys)[0] == 0
    old_page = (out / "report.html").read_bytes()
    real_replace = os.replace

    def replace(src, dst):
        if str(dst).endswith("report.html"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_replace(src, dst)

    monkeypatch.setattr(files.os, "replace", replace)
    status, _, err = call_main(_argv(data, out), capsys)
    assert status == 4  # every question is recorded; only the report is missing
    assert _error_lines(err) == [
        f"error: cannot write {out / 'report.html'}: no space left on the device. All 6 "
        f"records are in {out / 'predictions.jsonl'}; the report files are as the last "
        f"complete write left them; free some space, then rerun the same command (--out "
        f"{out}) to write them"
    ]
    assert (out / "report.html").read_bytes() == old_page
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp.html")]

    monkeypatch.setattr(files.os, "replace", real_replace)  # space freed; no_real_lm kept
    status, _, err = call_main(_argv(data, out), capsys)
    assert status == 0, err
    page = (out / "report.html").read_text()
    assert page != old_page.decode() and "oracle" in page
    assert set(_keys(out).values()) == {1} and len(_keys(out)) == 6


# --- a real full disk ----------------------------------------------------------------------

_N = 8
_SCRIPT = r"""
set -u
mount -t tmpfs -o size=4m tmpfs "$MNT" || exit 90
avail() { df --output=avail -B1 "$MNT" | tail -1 | tr -d ' '; }
fill_to() { rm -f "$MNT/ballast"; head -c $(( $(avail) - $1 )) /dev/zero > "$MNT/ballast"; }
run() { "$@" --out "$MNT/run" >"$OUT/$STEP.out" 2>"$OUT/$STEP.err"; echo $? >"$OUT/$STEP.rc"; }
# 1: a few records fit, then the disk is full mid-run.
STEP=1; fill_to 12288; run "$@"
cp "$MNT/run/predictions.jsonl" "$OUT/1.jsonl"
# 2: space again: the same command resumes and finishes.
STEP=2; rm -f "$MNT/ballast"; run "$@"
mkdir "$OUT/before" && cp "$MNT"/run/*.png "$MNT/run/report.html" "$OUT/before/"
# 3: room for config.json only: the reports cannot be written; the old ones stay.
STEP=3; fill_to $(( ( $(stat -c %s "$MNT/run/config.json") / 4096 + 3 ) * 4096 )); run "$@"
mkdir "$OUT/after3" && cp -a "$MNT/run/." "$OUT/after3/"
# 4: space again: the reports are written.
STEP=4; rm -f "$MNT/ballast"; run "$@"
cp -a "$MNT/run" "$OUT/run"
"""


def _namespace() -> list[str] | None:
    """``unshare`` into a user and mount namespace where a tmpfs can be mounted, or None."""
    unshare = shutil.which("unshare")
    if unshare is None or sys.platform != "linux":
        return None
    probe = subprocess.run(
        [unshare, "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
        capture_output=True,
        timeout=30,
    )
    return [unshare, "-rm"] if probe.returncode == 0 else None


def test_a_real_full_disk_on_a_small_tmpfs(tmp_path):
    namespace = _namespace()
    if namespace is None:
        pytest.skip(
            "no tmpfs can be mounted here (no user namespaces); the injected tests cover it"
        )
    dataset, corpus = _data(tmp_path, _N, set())
    mnt, out = tmp_path / "mnt", tmp_path / "out"
    mnt.mkdir()
    out.mkdir()
    env = {
        **os.environ,
        "MNT": str(mnt),
        "OUT": str(out),
        "DSPY_CACHEDIR": str(tmp_path / "dspy-cache"),
        "FRAMES_DSPY_CACHE": str(tmp_path / "cache"),
    }
    env.pop("OPENAI_API_KEY", None)
    with FaultServer(p_500=0, p_429=0, p_stall=0, lifetime=300) as server:
        command = evaluate_command(
            server, "--dataset", str(dataset), "--corpus", str(corpus), "--distractors", "none",
            "--conditions", "naive,bm25-2",
        )  # fmt: skip
        done = subprocess.run(
            [*namespace, "sh", "-c", _SCRIPT, "sh", *command],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    rc = {step: int((out / f"{step}.rc").read_text()) for step in (1, 2, 3, 4)}
    err = {step: (out / f"{step}.err").read_text() for step in (1, 2, 3, 4)}
    said = [_error_lines(err[step]) for step in (1, 3)]
    print(f"\ntmpfs: exit statuses {rc}; steps 1 and 3 said: {said}")
    run = mnt / "run"  # as the processes saw it (the tmpfs is gone now)

    # 1: the disk filled mid-run: one line, exit 3, only whole records kept.
    [line] = _error_lines(err[1])  # one line (after the usual estimate), no traceback
    assert rc[1] == 3
    assert line.startswith(f"error: cannot write {run / 'predictions.jsonl'}: no space left")
    assert "free some space, then rerun the same command" in line
    kept = (out / "1.jsonl").read_text()
    assert kept.endswith("\n") and 0 < len(kept.splitlines()) < 2 * _N
    # 2: the rerun resumed and finished.
    assert rc[2] == 0, err[2]
    # 3: the reports could not be written: exit 4, every record kept, the old reports stay.
    [line] = _error_lines(err[3])
    assert rc[3] == 4 and f"All {2 * _N} records are in" in line
    for name in ("accuracy_by_reasoning_type.png", "recall_by_round.png", "report.html"):
        assert (out / "after3" / name).read_bytes() == (out / "before" / name).read_bytes()
    assert not list((out / "after3").glob(".*.tmp*"))
    # 4: space again: done, every (condition, question) exactly once.
    assert rc[4] == 0, err[4]
    keys = _keys(out / "run")
    assert len(keys) == 2 * _N and set(keys.values()) == {1}
    assert json.loads((out / "run" / "summary.json").read_text())["bm25-2"]["n"] == _N


def test_a_read_only_run_folder_is_refused_before_anything_runs(
    data,
    no_real_lm,  # noqa: F811
    capsys,
    tmp_path,
    monkeypatch,
):
    out = tmp_path / "run"
    assert call_main(_argv(data, out, "naive"), capsys)[0] == 0
    made = len(no_real_lm)

    def read_only(*args, **kwargs):  # what a read-only mount answers (root ignores chmod)
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(out))

    monkeypatch.setattr("frames_dspy.results.run_folder.tempfile.NamedTemporaryFile", read_only)
    status, _, err = call_main(_argv(data, out), capsys)
    assert status == 2 and len(no_real_lm) == made  # no model made, so no LM call
    assert _error_lines(err) == [
        f"error: cannot write the run folder {out} (Read-only file system: {out}); its records "
        "are kept; make it writable and rerun to resume, or copy the folder somewhere "
        "writable and pass the copy as --out"
    ]
