"""frames_dspy.base.locks: one holder per folder, named when another is refused, never stale.

Holders in other processes are real processes (a short Python script), so the kernel's own
``flock`` decides; a killed holder must leave a lock that the next process takes at once.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from frames_dspy.base.locks import LOCK_NAME, FolderInUse, holder_of, lock_folder

REPO = Path(__file__).resolve().parents[2]

_HOLDER = """
import sys, time
from frames_dspy.base.locks import lock_folder
with lock_folder(sys.argv[1], what="test folder"):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _hold(folder: Path, seconds: float = 60.0) -> subprocess.Popen:
    """A process holding ``folder`` for ``seconds`` (returned once it holds it)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(folder), str(seconds), "--secret-free-marker"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)
    proc.stdout.close()


def test_the_holder_says_who_it_is_and_a_second_holder_is_refused(tmp_path):
    folder = tmp_path / "run"
    with lock_folder(folder, what="run folder", fix="choose another --out"):
        holder = holder_of(folder)
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        assert holder["started"].endswith("+00:00") and "pytest" in holder["command"]
        # Another open of the lock file (another thread, another call) is refused too.
        with pytest.raises(FolderInUse) as info, lock_folder(folder, what="run folder"):
            pass
    message = str(info.value)
    assert message.startswith(f"run folder {folder} is in use by pid {os.getpid()} on ")
    assert info.value.holder["pid"] == os.getpid()
    with lock_folder(folder):  # released at the end of the block
        pass


def test_another_process_is_named_and_its_death_frees_the_folder(tmp_path):
    folder = tmp_path / "run"
    proc = _hold(folder)
    try:
        fix = "wait, or choose another --out"
        with pytest.raises(FolderInUse) as info, lock_folder(folder, what="run", fix=fix):
            pass
        message = str(info.value)
        assert f"is in use by pid {proc.pid} on {socket.gethostname()} since " in message
        assert "--secret-free-marker" in message  # the holder's command
        assert message.endswith("; wait, or choose another --out")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        # No stale lock: the lock file stays (saying who held it last), the next one takes it.
        assert holder_of(folder)["pid"] == proc.pid
        with lock_folder(folder):
            assert holder_of(folder)["pid"] == os.getpid()
    finally:
        _stop(proc)


def test_wait_blocks_until_the_holder_is_done_and_says_so_once(tmp_path, caplog):
    folder = tmp_path / "cache"
    proc = _hold(folder, seconds=1.0)
    try:
        started = time.monotonic()
        with (
            caplog.at_level(logging.WARNING, logger="frames_dspy.base.locks"),
            lock_folder(folder, wait=True, what="the corpus folder"),
        ):
            waited = time.monotonic() - started
            assert proc.wait(timeout=10) == 0  # it finished before we got the folder
    finally:
        _stop(proc)
    assert waited > 0.3
    waits = [r.getMessage() for r in caplog.records if "waiting for" in r.getMessage()]
    assert len(waits) == 1
    assert f"waiting for the corpus folder {folder}: it is in use by pid {proc.pid}" in waits[0]


def test_folders_it_made_are_removed_when_left_empty(tmp_path):
    fresh = tmp_path / "runs" / "new"
    with lock_folder(fresh):
        assert (fresh / LOCK_NAME).is_file()
    assert not (tmp_path / "runs").exists()  # parents it made too

    kept = tmp_path / "kept"
    with lock_folder(kept):
        (kept / "config.json").write_text("{}")
    assert sorted(p.name for p in kept.iterdir()) == [LOCK_NAME, "config.json"]

    existing = tmp_path / "existing"
    existing.mkdir()
    with lock_folder(existing):
        pass
    assert existing.is_dir()  # not made by it: stays, with the lock file


def test_a_waiter_whose_lock_file_was_removed_takes_the_new_one(tmp_path):
    folder = tmp_path / "new"
    held, inside = threading.Event(), threading.Event()
    release = threading.Event()
    errors: list[BaseException] = []

    def first() -> None:
        with lock_folder(folder):  # made here, so removed at the end
            held.set()
            release.wait(10)

    def second() -> None:
        try:
            with lock_folder(folder, wait=True):
                inside.set()
                time.sleep(0.5)
        except BaseException as err:  # noqa: BLE001 - reported by the test
            errors.append(err)

    one = threading.Thread(target=first)
    one.start()
    assert held.wait(10)
    two = threading.Thread(target=second)
    two.start()
    time.sleep(0.3)  # the second now waits on the first's lock file
    release.set()
    assert inside.wait(10)
    # The second holds the lock file at the path, not the removed one: a third is refused.
    with pytest.raises(FolderInUse), lock_folder(folder):
        pass
    one.join()
    two.join()
    assert errors == []


def test_the_command_in_the_lock_file_has_no_password(tmp_path, monkeypatch):
    argv = ["python", "-m", "frames_dspy.evaluate", "--api-base", "http://u:hunter2@h:8000/v1"]
    monkeypatch.setattr(sys, "orig_argv", argv)
    with lock_folder(tmp_path / "run"):
        text = (tmp_path / "run" / LOCK_NAME).read_text()
    assert "hunter2" not in text
    assert json.loads(text)["command"].endswith("--api-base http://u:***@h:8000/v1")


def test_a_refusal_waits_a_moment_for_a_new_holder_to_say_who_it_is(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    lock = folder / LOCK_NAME
    probe = [sys.executable, "-c", "import os; print(os.getpid())"]
    dead = subprocess.run(probe, capture_output=True, text=True, check=True)
    lock.write_text(json.dumps({"pid": int(dead.stdout), "host": socket.gethostname()}))
    fd = os.open(lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # just taken: the file still names the dead predecessor
    me = {"pid": os.getpid(), "host": socket.gethostname(), "command": "the new holder"}
    timer = threading.Timer(0.3, lambda: lock.write_text(json.dumps(me)))
    timer.start()
    try:
        with pytest.raises(FolderInUse) as info, lock_folder(folder):
            pass
    finally:
        timer.join()
        os.close(fd)
    assert info.value.holder == me and "(the new holder)" in str(info.value)
