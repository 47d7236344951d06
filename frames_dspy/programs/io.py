"""Saving and loading programs: DSPy's JSON state plus the spec that rebuilds the program.

A ``program.json`` holds the prompts and demos of every predictor (``dump_state``), the whole
:class:`~frames_dspy.programs.spec.ProgramSpec` under ``frames_dspy_spec`` (the token budget
included, so a loaded program runs with the budget it was scored with), and free-form
provenance under ``frames_dspy_info`` (e.g. the study that chose it). The file alone rebuilds
the program.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import dspy

from frames_dspy.base.files import atomic_write_json
from frames_dspy.data.corpus import ArticleStore
from frames_dspy.programs.modules import build_program
from frames_dspy.programs.spec import ProgramSpec

logger = logging.getLogger(__name__)

__all__ = [
    "SPEC_KEY",
    "INFO_KEY",
    "save_program",
    "read_program_file",
    "check_program_file",
    "load_program",
]

SPEC_KEY = "frames_dspy_spec"
INFO_KEY = "frames_dspy_info"
_SPEC_FIELDS = frozenset(f.name for f in dataclasses.fields(ProgramSpec))


def save_program(program: dspy.Module, path: str | Path, *, extra: dict | None = None) -> None:
    """Write ``program`` (prompts, demos, spec) and ``extra`` provenance to ``path``.

    Args:
        program: A frames_dspy program (it has a ``spec``).
        path: The target file (written atomically).
        extra: JSON-serialisable provenance stored under ``frames_dspy_info``.
    """
    state = program.dump_state()
    state[SPEC_KEY] = program.spec.to_dict()
    if extra:
        state[INFO_KEY] = dict(extra)
    atomic_write_json(path, state)


def read_program_file(path: str | Path) -> tuple[ProgramSpec, dict[str, Any], dict[str, Any]]:
    """Read a ``program.json`` without building anything: (spec, DSPy state, provenance).

    Files written before the spec held the budget kept provenance keys inside the spec and the
    budget under ``optimize.context_tokens``; both are read.

    Raises:
        ValueError: the file is missing or not JSON, has no spec, or its spec is invalid.
    """
    try:
        state = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"cannot read program file {path}: {err}") from err
    if not isinstance(state, dict):
        raise ValueError(f"cannot read program file {path}: it is not a JSON object")
    raw = state.pop(SPEC_KEY, None)
    if not isinstance(raw, dict):
        raise ValueError(
            f"{path} has no '{SPEC_KEY}' entry: it was not written by frames_dspy "
            "(python -m optimize.compile writes program.json files that evaluate can load)"
        )
    info = dict(state.pop(INFO_KEY, None) or {})
    info.update({k: v for k, v in raw.items() if k not in _SPEC_FIELDS})
    shape = {k: v for k, v in raw.items() if k in _SPEC_FIELDS}
    legacy_budget = (info.get("optimize") or {}).get("context_tokens")
    if shape.get("context_tokens") is None and legacy_budget and shape.get("kind") != "naive":
        shape["context_tokens"] = legacy_budget
    try:
        spec = ProgramSpec.from_dict(shape)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}: its program spec is not valid ({err})") from err
    return spec, state, info


def load_program(
    path: str | Path,
    *,
    retriever=None,
    store: ArticleStore | None = None,
    context_tokens: int | None = None,
) -> tuple[dspy.Module, ProgramSpec, dict[str, Any]]:
    """Rebuild a saved program and load its prompts and demos.

    Args:
        path: A file written by :func:`save_program`.
        retriever, store: The parts the program's kind needs.
        context_tokens: Override the saved budget (None keeps it; a file without one gets
            :func:`~frames_dspy.programs.modules.build_program`'s default).

    Returns:
        The program, its spec (as built) and the file's provenance.

    Raises:
        ValueError: unreadable file, no or invalid spec, or predictors that do not match the
            program its spec describes.
    """
    spec, state, info = read_program_file(path)
    if context_tokens is not None and spec.takes("context_tokens"):
        if spec.context_tokens not in (None, context_tokens):
            logger.warning(
                "%s was saved with a %d-token article budget; running it with %d as asked",
                path,
                spec.context_tokens,
                context_tokens,
            )
        spec = spec.replace(context_tokens=context_tokens)
    program = build_program(spec, retriever=retriever, store=store)
    _check_predictors(program, state, path)
    program.load_state(state)
    return program, program.spec, info


class _Unused:
    """Stands in for the retriever and store when a program is built only to be checked."""


def check_program_file(path: str | Path) -> ProgramSpec:
    """Check that a ``program.json`` can be loaded, without a model, corpus or index.

    Returns:
        The saved spec.

    Raises:
        ValueError: as :func:`load_program` would.
    """
    spec, state, _ = read_program_file(path)
    program = build_program(spec, retriever=_Unused(), store=_Unused())
    _check_predictors(program, state, path)
    return spec


def _check_predictors(program: dspy.Module, state: dict[str, Any], path: str | Path) -> None:
    expected = {name for name, _ in program.named_predictors()}
    found = {k for k in state if k != "metadata"}
    if expected != found:
        raise ValueError(
            f"{path} holds predictors {sorted(found)} but a {program.spec.kind} program has "
            f"{sorted(expected)}: the file belongs to a different program shape"
        )
    # Predictors of one name can still differ in their fields (naive's answer step has no
    # context); DSPy would load the saved fields by position onto the wrong ones.
    for name, predictor in program.named_predictors():
        saved = ((state.get(name) or {}).get("signature") or {}).get("fields")
        if isinstance(saved, list) and len(saved) != len(predictor.signature.fields):
            raise ValueError(
                f"{path}: its {name!r} step has {len(saved)} fields but a {program.spec.kind} "
                f"program's has {len(predictor.signature.fields)}: the file belongs to a "
                "different program shape"
            )
