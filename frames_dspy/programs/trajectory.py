"""What the agent did on one question: its steps as typed data, their counts, and a recorder.

An agent (:class:`~frames_dspy.programs.agent.SearchAgent`) takes steps: it chooses a tool
(``search``, ``read`` or ``finish``) with an argument and sees what came back. Each step is
an :class:`AgentStep`; what happened to it is its ``outcome``, one of :data:`OUTCOMES`, so a
malformed call, an unknown title or a search that found nothing is data the record keeps and
the summary counts (:class:`AgentCounts`), never a crash. Why the agent stopped is one of
:data:`STOP_REASONS`.

:func:`recording_steps` is the sibling of the round trace in
:mod:`frames_dspy.programs.modules`: the runner opens both around a question, the agent notes
each step as it happens, so a question that fails half-way still shows what it did.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = [
    "SEARCH",
    "READ",
    "FINISH",
    "TOOLS",
    "OUTCOMES",
    "MALFORMED",
    "STOP_REASONS",
    "AgentStep",
    "AgentCounts",
    "AgentTrace",
    "recording_steps",
    "note_start",
    "note_step",
    "note_stop",
]

SEARCH, READ, FINISH = "search", "read", "finish"
#: The tools an agent may call.
TOOLS = (SEARCH, READ, FINISH)

#: What became of a step: it worked (``ok``); a search found nothing (``no_results``); a
#: read named no article the store has (``unknown_title``) or one already read
#: (``already_read``); or the call was malformed: a tool that does not exist
#: (``unknown_tool``), a search or read without its argument (``no_argument``), a reply the
#: adapter could not parse (``unreadable``).
OUTCOMES = (
    "ok",
    "no_results",
    "unknown_title",
    "already_read",
    "unknown_tool",
    "no_argument",
    "unreadable",
)
#: The outcomes of a malformed call.
MALFORMED = frozenset({"unknown_tool", "no_argument", "unreadable"})

#: Why an agent stopped: it chose to (``finish``), or a limit ended it: its steps, the
#: articles it may read, its tokens; ``error``: the program raised (recorded by the runner).
STOP_REASONS = ("finish", "steps", "articles", "tokens", "error")


@dataclass
class AgentStep:
    """One step: the tool chosen, its argument, what came back, and what it cost.

    Attributes:
        action: The tool as the agent named it (``search``, ``read``, ``finish``, or the
            unknown name it gave; "" when its reply could not be read).
        argument: The query or title it gave ("" for ``finish``).
        outcome: One of :data:`OUTCOMES`.
        observation: A short form of what came back (result titles, the opening of the
            article read, or what was wrong with the call).
        article_ids: A search's results, or the article read.
        tokens: Metered tokens of the LM calls that chose this step.
    """

    action: str
    argument: str = ""
    outcome: str = "ok"
    observation: str = ""
    article_ids: list[str] = field(default_factory=list)
    tokens: int = 0

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise ValueError(f"unknown step outcome {self.outcome!r}; choose one of {OUTCOMES}")

    @property
    def malformed(self) -> bool:
        return self.outcome in MALFORMED

    @property
    def is_search(self) -> bool:
        """A search that was sent (with its keywords), whatever it found."""
        return self.action == SEARCH and self.outcome in ("ok", "no_results")

    @property
    def is_read(self) -> bool:
        """A read that added an article."""
        return self.action == READ and self.outcome == "ok"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentStep:
        """A step from its JSON object (fields this version does not know are left out)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class AgentCounts:
    """What an agent's steps add up to.

    Attributes:
        steps: Every step, malformed ones included.
        searches: Searches sent.
        reads: Articles read.
        malformed: Malformed calls (:data:`MALFORMED`).
        unknown_titles: Reads of a title the store does not have.
        empty_searches: Searches that found nothing.
        rereads: Reads of an article already read.
    """

    steps: int = 0
    searches: int = 0
    reads: int = 0
    malformed: int = 0
    unknown_titles: int = 0
    empty_searches: int = 0
    rereads: int = 0

    @classmethod
    def of(cls, steps: Sequence[AgentStep]) -> AgentCounts:
        return cls(
            steps=len(steps),
            searches=sum(s.is_search for s in steps),
            reads=sum(s.is_read for s in steps),
            malformed=sum(s.malformed for s in steps),
            unknown_titles=sum(s.outcome == "unknown_title" for s in steps),
            empty_searches=sum(s.outcome == "no_results" for s in steps),
            rereads=sum(s.outcome == "already_read" for s in steps),
        )


@dataclass
class AgentTrace:
    """The steps of the agent running in this thread so far (None: no agent ran), and why
    it stopped (None while it runs, or when it failed)."""

    steps: list[AgentStep] | None = None
    stop_reason: str | None = None


_STEPS: ContextVar[AgentTrace | None] = ContextVar("frames_agent_steps", default=None)


@contextlib.contextmanager
def recording_steps() -> Iterator[AgentTrace]:
    """Collect the steps of the agent run in the block (none for other programs)."""
    trace = AgentTrace()
    token = _STEPS.set(trace)
    try:
        yield trace
    finally:
        _STEPS.reset(token)


def note_start() -> None:
    """Say that an agent started (so one that fails before its first step still has a
    trajectory, an empty one), if a trace is being recorded."""
    trace = _STEPS.get()
    if trace is not None:
        trace.steps, trace.stop_reason = [], None


def note_step(step: AgentStep) -> None:
    """Add a step to the recorded trace, if one is being recorded."""
    trace = _STEPS.get()
    if trace is not None:
        if trace.steps is None:
            trace.steps = []
        trace.steps.append(step)


def note_stop(reason: str) -> None:
    """Say why the agent stopped, in the recorded trace, if one is being recorded."""
    if reason not in STOP_REASONS:
        raise ValueError(f"unknown stop reason {reason!r}; choose one of {STOP_REASONS}")
    trace = _STEPS.get()
    if trace is not None:
        trace.stop_reason = reason
