"""Small file helpers every part shares: atomic writes and content hashes.

A run, a study or a model cache may be killed at any moment, and several workers may write the
same file; a reader must then see either the old file or the new one, never half of one. So
every JSON or text file is written to a temporary name in the same folder and renamed into
place (``os.replace`` is atomic on one file system).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "atomic_write_text",
    "atomic_write_json",
    "atomic_path",
    "sha256_file",
    "sha256_bytes",
]

_CHUNK = 8 * 1024 * 1024


@contextlib.contextmanager
def atomic_path(path: str | Path, *, mode: int = 0o644) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; renamed over ``path`` when the block ends
    without an error, removed otherwise (so a failed write leaves the previous file).

    Raises:
        OSError: the write or the rename failed; the error names ``path``, not the
            temporary file.
    """
    target = Path(path)
    tmp = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # The suffix stays last, for writers that pick the format from it (matplotlib).
        fd, name = tempfile.mkstemp(
            dir=target.parent, prefix=f".{target.stem}.", suffix=f".tmp{target.suffix}"
        )
        os.close(fd)
        tmp = Path(name)
        yield tmp
        with open(tmp, "rb") as handle:  # durable before it replaces the old file
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except OSError as err:
        _remove(tmp)
        raise OSError(err.errno, err.strerror or str(err), str(target)) from err
    except BaseException:
        _remove(tmp)
        raise


def _remove(tmp: Path | None) -> None:
    if tmp is not None:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def atomic_write_text(path: str | Path, text: str, *, mode: int = 0o644) -> None:
    """Write ``text`` to ``path`` so that no reader ever sees a partial file.

    Args:
        path: The target; its folder is created if needed.
        text: The content (UTF-8).
        mode: Permission bits of the result (``mkstemp`` would leave 0600).

    Raises:
        OSError: the write failed (a full disk, no permission); ``path`` is as it was.
    """
    with atomic_path(path, mode=mode) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_json(path: str | Path, payload: Any, *, indent: int | None = 2) -> None:
    """Write ``payload`` as JSON atomically (non-JSON values such as paths become strings)."""
    text = json.dumps(payload, indent=indent, ensure_ascii=False, default=str)
    atomic_write_text(path, text + ("\n" if indent is not None else ""))


def sha256_file(path: str | Path) -> str:
    """The hex SHA-256 of a file's bytes, read in chunks (model files are gigabytes)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_bytes(data: bytes | str) -> str:
    """The hex SHA-256 of bytes (a string is encoded as UTF-8 first)."""
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()
