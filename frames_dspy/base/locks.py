"""One writer per folder: an exclusive lock that the kernel releases when its holder dies.

A run folder, a study's output folder, a corpus or an index being built in the user cache is
written by one process at a time. :func:`lock_folder` takes an exclusive ``fcntl.flock`` on
``FOLDER/.lock`` and writes who holds it (pid, host, start time, command) into that file. A
second process is refused at once with :class:`FolderInUse`, whose message names the holder
and the fix, or waits for the holder to finish (``wait=True``, for builds in the cache).

The kernel drops an ``flock`` when the process holding it exits or is killed (SIGKILL
included), so a killed run never leaves a stale lock: the file then only says who held it
last, and the next process takes it at once. ``flock`` is per open file, so two threads (or
two ``lock_folder`` calls) of one process exclude each other too. On NFS, Linux maps ``flock``
to a lock the server keeps, so two machines sharing a folder exclude each other as well.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import shlex
import socket
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from frames_dspy.base.redaction import redact_text

logger = logging.getLogger(__name__)

__all__ = ["LOCK_NAME", "FolderInUse", "lock_folder", "holder_of", "describe_holder"]

#: The lock file every locked folder holds.
LOCK_NAME = ".lock"
_DEFAULT_FIX = "wait for it to finish, or use another folder"
#: Seconds a refused process waits for a new holder to say who it is.
_WRITE_WAIT = 1.0


class FolderInUse(RuntimeError):
    """Another process holds the folder's lock; the message names it and the fix.

    Attributes:
        folder: The locked folder.
        holder: What the holder wrote into the lock file (``pid``, ``host``, ``started``,
            ``command``); empty if it had not written it yet.
    """

    def __init__(self, folder: Path, holder: dict[str, Any], *, what: str, fix: str):
        self.folder = folder
        self.holder = holder
        super().__init__(f"{what} {folder} is in use by {describe_holder(holder)}; {fix}")


def describe_holder(holder: dict[str, Any]) -> str:
    """``pid 123 on host-a since 2026-01-01T10:00:00+00:00 (python -m ...)``."""
    if not holder.get("pid"):
        return "another process (it has not said which yet)"
    text = f"pid {holder['pid']} on {holder.get('host', '?')}"
    if holder.get("started"):
        text += f" since {holder['started']}"
    if holder.get("command"):
        text += f" ({holder['command']})"
    return text


def holder_of(folder: str | Path) -> dict[str, Any]:
    """What the last holder of ``folder``'s lock wrote about itself ({} if nothing)."""
    try:
        holder = json.loads((Path(folder) / LOCK_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _alive(holder: dict[str, Any]) -> bool:
    """Whether the process a lock file names still runs (one on another host is assumed to)."""
    if not holder.get("pid"):
        return False
    if holder.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(holder["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, OverflowError):
        return True
    return True


def _current_holder(folder: Path) -> dict[str, Any]:
    """The holder of a lock just found taken. A process that has just taken it writes who
    it is a moment later; until then the file is empty or names its dead predecessor."""
    deadline = time.monotonic() + _WRITE_WAIT
    while True:
        holder = holder_of(folder)
        if _alive(holder) or time.monotonic() > deadline:
            return holder
        time.sleep(0.05)


def _this_process() -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        # The command as typed (python -m ...), its URLs without passwords.
        "command": redact_text(shlex.join(getattr(sys, "orig_argv", sys.argv))),
    }


def _open(folder: Path) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    return os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


def _still_linked(fd: int, path: Path) -> bool:
    # A holder that made the folder removes it (lock file first) if it stays empty; a waiter
    # that then gets the lock of the removed file must take the new one instead.
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


def _acquire(folder: Path, *, wait: bool, what: str, fix: str) -> int:
    told = False
    while True:
        try:
            fd = _open(folder)
        except FileNotFoundError:  # the folder was removed between mkdir and open: again
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _current_holder(folder)
                if not wait:
                    raise FolderInUse(folder, holder, what=what, fix=fix) from None
                if not told:
                    logger.warning(
                        "waiting for %s %s: it is in use by %s",
                        what,
                        folder,
                        describe_holder(holder),
                    )
                    told = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            if _still_linked(fd, folder / LOCK_NAME):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def _write_holder(fd: int) -> None:
    data = (json.dumps(_this_process(), ensure_ascii=False) + "\n").encode("utf-8")
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
    except OSError as err:
        # Who holds it is a courtesy for the refused; a full disk must not stop the holder.
        logger.debug("could not write the lock holder (%s)", err)


def _missing(folder: Path) -> list[Path]:
    """``folder`` and its parents that do not exist yet, innermost first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_if_empty(made: list[Path]) -> None:
    """Remove the folders this holder made if they hold nothing but its lock file."""
    try:
        if [p.name for p in made[0].iterdir()] != [LOCK_NAME]:
            return
        (made[0] / LOCK_NAME).unlink()
        for folder in made:
            folder.rmdir()
    except OSError as err:
        if err.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST):
            logger.debug("could not remove the empty folder %s (%s)", made[0], err)


@contextlib.contextmanager
def lock_folder(
    folder: str | Path,
    *,
    wait: bool = False,
    what: str = "folder",
    fix: str = _DEFAULT_FIX,
) -> Iterator[Path]:
    """Hold ``folder`` (created if needed) for this process until the block ends.

    Takes an exclusive ``fcntl.flock`` on ``folder/.lock`` and writes this process's pid,
    host, start time and command (URLs redacted) into it. Folders this call made are removed
    again if the block left them empty, so a run that failed early leaves nothing behind.

    Args:
        folder: The folder to hold.
        wait: Wait for the holder to finish (logging once who it is) instead of raising.
        what: What the folder is, for the messages (``"run folder"``).
        fix: What to do when it is in use, for the message (``"wait ..., or choose another
            --out"``).

    Yields:
        The folder, as a ``Path``.

    Raises:
        FolderInUse: another process holds it and ``wait`` is False.
        OSError: the lock file cannot be created (a read-only folder, no permission).
    """
    folder = Path(folder)
    made = _missing(folder)
    fd = _acquire(folder, wait=wait, what=what, fix=fix)
    try:
        _write_holder(fd)
        yield folder
    finally:
        if made:
            _remove_if_empty(made)
        os.close(fd)
