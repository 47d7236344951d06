"""The prediction record: one question under one condition, typed, versioned, read and written here.

A :class:`QuestionRecord` is what :mod:`frames_dspy.run.runner` makes of one question and what
every figure is computed from (:mod:`frames_dspy.results.summary`). This module alone turns records
into JSON lines of ``predictions.jsonl`` and back; everywhere else reads their fields as
attributes (``tests/results/test_records.py`` scans the code for string-key access).

Tokens mean one thing everywhere: :attr:`QuestionRecord.tokens` is the program LM's
*metered* tokens (prompt plus completion at :data:`~frames_dspy.lm.accounting.CHARS_PER_TOKEN`
characters per token, every call counted, answered from the cache or not). What the LM
itself reported (a cached call reports nothing) is kept as ``prompt_tokens`` and
``completion_tokens`` and shown as *reported* tokens; it is what money is spent on.

Schema versions (``record_schema`` in a run folder's ``config.json``):

1. the untyped dict before this module; fields were added over time, so a version-1 line
   may lack some. Reading migrates it: a missing field takes the value a question that
   predates it would have had (``None`` for "not checked", 0 for a count).
2. every field present, types as declared below.
3. adds what an agent did (``trajectory``, ``stop_reason``) and the near-repeat share of the
   LM's queries (``near_repeat_rate``) (this version). A version-2 line has none of them:
   it reads as a record of a condition without a trajectory whose repetition was not
   measured (all three None).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from frames_dspy.programs.trajectory import AgentCounts, AgentStep

logger = logging.getLogger(__name__)

__all__ = [
    "SCHEMA_VERSION",
    "RecordError",
    "QuestionRecord",
    "PredictionsFile",
    "record_fields",
    "read_records",
    "unique_records",
    "folder_schema",
    "records_frame",
]

#: The version of the record written by this code (``record_schema`` in ``config.json``).
SCHEMA_VERSION = 3


class RecordError(ValueError):
    """A predictions file that cannot be read as records; the message names the file and the fix."""


@dataclass
class QuestionRecord:
    """One question run under one condition, judged and metered.

    Attributes:
        condition: The condition's label (or ``trial-N`` for a study's dev runs).
        id, question, gold_answer, reasoning_types, n_gold: The FRAMES row.
        answer: The program's answer ("" when it failed or ran retrieval only).
        correct: The autorater's verdict; None when the judge failed (counts as not correct).
        judge_method: A rule's name, ``judge`` (the LM judge) or ``judge_error``.
        judge_p_true: P(TRUE) when the judge LM gave log-probabilities.
        judge_explanation: Why the verdict (the rule or the judge's text).
        error, error_kind: The program's exception (repr, type name), or None.
        gold_ids, gold_titles: The gold articles the corpus has.
        context_ids: Article ids added to the context, per retrieval round.
        recall: Gold-article recall after each round; [] when nothing was retrieved, None
            when the question has no gold article in the corpus.
        queries: The queries written, per round.
        query_stats, query_repetition_rate: How often queries repeated (exactly, as the
            program counted them).
        near_repeat_rate: The share of the LM's queries that near-repeat an earlier one
            (:data:`~frames_dspy.results.metrics.NEAR_REPEAT`); None when the LM chose none
            or a version-2 record did not measure it.
        trajectory: What the agent did, step by step (:class:`AgentStep`: action, argument,
            outcome, a short form of what came back, tokens); None for the conditions
            without one. Its ``context_ids`` and ``queries`` have one round per step.
        stop_reason: Why the agent stopped (``finish``, ``steps``, ``articles``,
            ``tokens``, ``error``); None without a trajectory.
        packing: How the articles were fitted into the answer prompt.
        answer_in_context: Was the gold answer in the text the answer step saw (None: not
            checkable).
        prompt_tokens, completion_tokens: What the program LM reported (0 for cached calls).
        lm_calls, cached_calls, failed_calls: The program LM's calls, cached ones included.
        retries: Retried faults, program and judge.
        metered_tokens: The program LM's metered tokens (see the module docstring).
        judge_calls, judge_cached_calls, judge_prompt_tokens, judge_completion_tokens: The
            judge LM's calls and metered tokens.
        seconds: Wall time of the question.
        cost_usd: Dollars, when LiteLLM knows the models' prices (reported tokens).
    """

    condition: str
    id: int
    question: str = ""
    gold_answer: str = ""
    answer: str = ""
    correct: bool | None = None
    judge_method: str | None = None
    judge_p_true: float | None = None
    judge_explanation: str = ""
    error: str | None = None
    error_kind: str | None = None
    reasoning_types: list[str] = field(default_factory=list)
    n_gold: int = 0
    gold_ids: list[str] = field(default_factory=list)
    gold_titles: list[str] = field(default_factory=list)
    context_ids: list[list[str]] = field(default_factory=list)
    recall: list[float] | None = None
    queries: list[list[str]] = field(default_factory=list)
    query_stats: dict[str, Any] | None = None
    query_repetition_rate: float | None = None
    near_repeat_rate: float | None = None
    trajectory: list[AgentStep] | None = None
    stop_reason: str | None = None
    packing: dict[str, Any] | None = None
    answer_in_context: bool | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    lm_calls: int = 0
    cached_calls: int = 0
    failed_calls: int = 0
    retries: int = 0
    metered_tokens: int = 0
    judge_calls: int = 0
    judge_cached_calls: int = 0
    judge_prompt_tokens: int = 0
    judge_completion_tokens: int = 0
    seconds: float = 0.0
    cost_usd: float | None = None

    # --- derived figures: the one definition of each --------------------------------------

    @property
    def is_correct(self) -> bool:
        """True only for a TRUE verdict (a judge error is not correct)."""
        return self.correct is True

    @property
    def failed(self) -> bool:
        """The program raised (the question counts as wrong)."""
        return self.error is not None

    @property
    def judge_failed(self) -> bool:
        return self.judge_method == "judge_error"

    @property
    def tokens(self) -> int:
        """The program LM's metered tokens: every call, cached or not."""
        return self.metered_tokens

    @property
    def reported_tokens(self) -> int:
        """The program LM's tokens as it reported them (a cached call reports 0)."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def judge_tokens(self) -> int:
        """The judge LM's metered tokens."""
        return self.judge_prompt_tokens + self.judge_completion_tokens

    @property
    def final_recall(self) -> float | None:
        """Recall after the last round: None without a gold article, 0 when nothing was found."""
        if self.recall is None:
            return None
        return float(self.recall[-1]) if self.recall else 0.0

    @property
    def round1_recall(self) -> float | None:
        """Recall after the first round (None and 0 as :attr:`final_recall`)."""
        if self.recall is None:
            return None
        return float(self.recall[0]) if self.recall else 0.0

    # --- what an agent did (None for the conditions without a trajectory) ------------------

    @property
    def agent_counts(self) -> AgentCounts | None:
        """Steps, searches, articles read, malformed calls ... of the agent's trajectory."""
        return None if self.trajectory is None else AgentCounts.of(self.trajectory)

    @property
    def searched_ids(self) -> list[str] | None:
        """The articles the agent's searches showed it, each once, in order."""
        if self.trajectory is None:
            return None
        shown = (i for step in self.trajectory if step.is_search for i in step.article_ids)
        return list(dict.fromkeys(shown))

    @property
    def read_ids(self) -> list[str] | None:
        """The articles the agent read, in order."""
        if self.trajectory is None:
            return None
        return [i for step in self.trajectory if step.is_read for i in step.article_ids]

    @property
    def used_ids(self) -> list[str] | None:
        """The articles the answer step saw some of, after packing (none when it did not
        run with articles)."""
        if self.trajectory is None:
            return None
        kept = (self.packing or {}).get("kept_fraction") or {}
        return [i for i, fraction in kept.items() if fraction > 0]

    def gold_share(self, ids: list[str] | None) -> float | None:
        """The share of the gold articles among ``ids``; None without a gold article or
        without ids to look at (a condition without a trajectory)."""
        if ids is None or not self.gold_ids:
            return None
        gold = set(self.gold_ids)
        return len(gold & set(ids)) / len(gold)

    # --- JSON ------------------------------------------------------------------------------

    def to_json(self) -> str:
        """One line of ``predictions.jsonl`` (no newline)."""
        return json.dumps(asdict(self), ensure_ascii=False, default=str)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, where: str = "a record") -> QuestionRecord:
        """A record from its JSON object, migrating a version-1 one (missing fields defaulted).

        Raises:
            RecordError: ``condition`` or ``id`` is missing, or the object is not a record.
        """
        if not isinstance(data, dict):
            raise RecordError(f"{where} is not a JSON object")
        missing = [name for name in ("condition", "id") if name not in data]
        if missing:
            raise RecordError(f"{where} has no {' or '.join(missing)}")
        known = _FIELD_NAMES
        unknown = sorted(set(data) - known)
        if unknown:
            logger.debug("%s: ignoring fields this version does not know: %s", where, unknown)
        values = {name: data[name] for name in known if name in data}
        values["condition"] = str(values["condition"])
        values["id"] = _id(values["id"])
        for name in _COUNTS:
            if values.get(name) is None and name in values:
                values[name] = 0  # a version-1 count that was never filled in
        if values.get("trajectory") is not None:
            values["trajectory"] = [_step(s, where) for s in values["trajectory"]]
        if values.get("judge_explanation") is None and "judge_explanation" in values:
            values["judge_explanation"] = ""
        return cls(**values)


def _step(data: Any, where: str) -> AgentStep:
    if isinstance(data, AgentStep):
        return data
    if not isinstance(data, dict) or "action" not in data:
        raise RecordError(f"{where} has a trajectory step that is not a step: {data!r}"[:300])
    try:
        return AgentStep.from_dict(data)
    except ValueError as err:
        raise RecordError(f"{where}: {err}") from None


def _id(value: Any) -> Any:
    # Ids are ints in predictions.jsonl; a hand-edited "7" must still pair with 7.
    try:
        return int(value)
    except (TypeError, ValueError):
        return str(value)


def record_fields() -> tuple[str, ...]:
    """The names of a record's fields, in the order they are written."""
    return tuple(f.name for f in fields(QuestionRecord))


_FIELD_NAMES = frozenset(record_fields())
_COUNTS = tuple(
    f.name for f in fields(QuestionRecord) if f.type == "int" and f.default is not MISSING
)


def folder_schema(config: dict[str, Any] | None, *, folder: str | Path) -> int:
    """The record schema a run folder's ``config.json`` declares (1 when it declares none).

    Raises:
        RecordError: the folder was written by a newer version (upgrade to read it).
    """
    version = (config or {}).get("record_schema", 1)
    if not isinstance(version, int) or version < 1:
        raise RecordError(
            f"{folder}/config.json has record_schema={version!r}, which is not a version; "
            "restore the file from the run that wrote it"
        )
    if version > SCHEMA_VERSION:
        raise RecordError(
            f"{folder} holds prediction records of schema {version}, newer than this "
            f"frames-dspy reads ({SCHEMA_VERSION}); upgrade frames-dspy (pip install -U "
            "frames-dspy, or pull the repository) to read it"
        )
    return version


def read_records(path: str | Path, *, schema: int = SCHEMA_VERSION) -> list[QuestionRecord]:
    """The records of a ``predictions.jsonl`` (or of a run folder's); a torn last line (a
    killed writer) is ignored. Version-1 lines are migrated (see the module docstring).

    Raises:
        RecordError: a line other than the last is not valid JSON, or a line is not a
            record (the message names the file, the line and the fix).
    """
    path = Path(path)
    if path.is_dir():
        path = path / "predictions.jsonl"
    if not path.is_file():
        return []
    records = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            if lineno == len(lines):
                logger.warning("ignoring an incomplete last line in %s", path)
                continue
            raise RecordError(
                f"{path}: line {lineno} is not valid JSON; repair or delete that line"
            ) from None
        records.append(_from_line(data, f"{path}: line {lineno}", schema))
    return records


def unique_records(records: Iterable[QuestionRecord]) -> tuple[list[QuestionRecord], int]:
    """One record per (condition, question id), and how many records were left out.

    A key recorded more than once (two runs that wrote one folder at once, before folders
    were locked) keeps its last record, as a comparison of runs does; keys keep the order in
    which they first appear.
    """
    kept: dict[tuple[str, Any], QuestionRecord] = {}
    total = 0
    for record in records:
        kept[(record.condition, record.id)] = record  # a key keeps its place, the last record
        total += 1
    return list(kept.values()), total - len(kept)


def _from_line(data: Any, where: str, schema: int) -> QuestionRecord:
    try:
        return QuestionRecord.from_dict(data, where=where)
    except (RecordError, TypeError) as err:
        raise RecordError(
            f"{err} (record schema {schema}); it is not a frames-dspy prediction record: "
            "delete the line, or run the questions again into a new --out"
        ) from None


class PredictionsFile:
    """``predictions.jsonl``: appended under a lock, one fsynced line per record.

    Each line goes to the file in one ``write`` on a file opened for appending, so processes
    that share a file (a study's workers, each writing its own trials) never interleave
    lines. A write that fails half-way (a full disk) is cut off again, so the file never
    holds half a line that later lines would follow.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._repair_tail()

    def _repair_tail(self) -> None:
        # A SIGKILL can leave half a line; cut it so the next append starts a fresh line.
        if not self.path.is_file():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            keep = data.rfind(b"\n") + 1
            logger.warning("dropping an incomplete last line in %s", self.path)
            with self.path.open("r+b") as handle:
                handle.truncate(keep)

    def check_writable(self) -> None:
        """Open an existing file for appending, so a read-only one fails before any
        question runs (a new one is made by the first append).

        Raises:
            OSError: it cannot be written (the error names the file).
        """
        if self.path.exists():
            os.close(os.open(self.path, os.O_WRONLY | os.O_APPEND))

    def append(self, record: QuestionRecord) -> None:
        """Add one record and make it durable before returning.

        Raises:
            OSError: the line could not be written (a full disk, no permission); the file
                is as it was before.
        """
        if not isinstance(record, QuestionRecord):
            raise TypeError(f"expected a QuestionRecord, got {type(record).__name__}")
        data = (record.to_json() + "\n").encode("utf-8")
        with self._lock:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                _append_line(fd, data)
            except OSError as err:
                raise OSError(err.errno, err.strerror, str(self.path)) from err
            finally:
                os.close(fd)

    def read(self, *, schema: int = SCHEMA_VERSION) -> list[QuestionRecord]:
        return read_records(self.path, schema=schema)


def _append_line(fd: int, data: bytes) -> None:
    """Write ``data`` at the end of ``fd`` and fsync it; on failure cut it off again."""
    start = os.fstat(fd).st_size
    try:
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        os.fsync(fd)
    except OSError:
        # Cut what landed of the line, unless another process appended since (its line
        # must stay): then what follows ``start`` is not the start of ours.
        with contextlib.suppress(OSError):
            end = os.fstat(fd).st_size
            if end > start and data.startswith(os.pread(fd, end - start, start)):
                os.ftruncate(fd, start)
        raise


def records_frame(records: list[QuestionRecord]):
    """A pandas DataFrame with one column per field (for notebooks)."""
    import pandas as pd

    return pd.DataFrame.from_records([asdict(r) for r in records], columns=record_fields())
