"""The agent condition: the model searches, reads what it chooses and stops when it judges
it has enough, under limits a user sets; then the answer step every condition shares.

The paper's pipeline (:class:`~frames_dspy.programs.modules.MultiHop`) runs a fixed number of
rounds. Here the model decides each step with one call of :class:`ChooseAction`: ``search``
(keywords -> the top ``n_docs`` titles with their opening words), ``read`` (a title -> the
article joins the answer's context, and the agent sees its opening) or ``finish``. It stops
when it finishes or a limit is reached (steps, articles read, metered tokens); the record
says which (:data:`~frames_dspy.programs.trajectory.STOP_REASONS`). The articles it read are
then packed into the answer prompt under the run's budget and answered by the same
:class:`AnswerWithContext` step as every other condition, so accuracy, recall and tokens
compare with the fixed-rounds conditions on one index, one judge and one meter.

Why our own loop and not ``dspy.ReAct`` (dspy 3.4.1): ReAct ends the whole trajectory when a
reply cannot be parsed or names a tool it does not know (both are ``ValueError`` there), where
here a malformed call must be an observation the model sees and the record counts; its
answer is an extraction over the trajectory text, not our answer step over packed articles;
it knows one limit (iterations), not articles read or tokens; and its prompt repeats every
observation in full, where a read article here is seen as its opening and older search
results as their titles, so the prompt stays bounded. The loop below is ReAct's shape
(think, choose a tool, observe) with those four differences.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import dspy
from dspy.utils.exceptions import AdapterParseError

from frames_dspy.data.corpus import Article
from frames_dspy.lm.accounting import QuestionMeter, own_meter
from frames_dspy.programs.modules import _FramesProgram, _note_round
from frames_dspy.programs.packing import PackedContext
from frames_dspy.programs.signatures import ChooseAction
from frames_dspy.programs.trajectory import (
    FINISH,
    READ,
    SEARCH,
    AgentCounts,
    AgentStep,
    note_start,
    note_step,
    note_stop,
)

if TYPE_CHECKING:
    from frames_dspy.retrieval.bm25 import Hit

logger = logging.getLogger(__name__)

__all__ = ["SearchAgent"]

#: Characters of an argument kept: a small model's runaway reply is not a query.
_ARGUMENT_CHARS = 300
#: Characters of a read article's opening kept in its step's record.
_NOTE_CHARS = 160
_CALL = re.compile(r"\W*([A-Za-z_]+)(.*)", re.DOTALL)
_RESULT_NUMBER = re.compile(r"(?:\[|#|no\.?\s*|result\s*)?(\d{1,3})\]?", re.IGNORECASE)
_RESULT_LINE = re.compile(r"^\[\d+\]\s*")


@dataclass(frozen=True)
class Choice:
    """The tool the model chose and its argument, tidied; ``problem``: why its reply could
    not be read (then there is no tool)."""

    tool: str
    argument: str = ""
    problem: str | None = None


@dataclass
class _Turn:
    """A step with what the model sees of it: ``full`` while it is the latest search (or
    always, for reads and errors), ``short`` once a later search replaced it."""

    step: AgentStep
    full: str
    short: str


@dataclass
class AgentWork:
    """What the agent holds on one question: its steps, the articles it read, the latest
    results (a read may name one by its number), and the searches it sent."""

    question: str
    turns: list[_Turn] = field(default_factory=list)
    articles: list[Article] = field(default_factory=list)
    latest: list[Hit] = field(default_factory=list)
    context_ids: list[list[str]] = field(default_factory=list)
    queries: list[list[str]] = field(default_factory=list)

    @property
    def steps(self) -> list[AgentStep]:
        return [turn.step for turn in self.turns]

    @property
    def read_ids(self) -> set[str]:
        return {a.id for a in self.articles}

    def observe(self, turn: _Turn) -> None:
        """Keep a step, and note it where the runner records rounds and steps: a round per
        step (the articles read after it, the search it sent), so recall is per step."""
        self.turns.append(turn)
        step = turn.step
        self.context_ids.append([a.id for a in self.articles])
        self.queries.append([step.argument] if step.is_search else [])
        _note_round(self.context_ids[-1], self.queries[-1])
        note_step(step)

    def view(self) -> str:
        """The steps as the model sees them: every read's opening, every error, the latest
        search's results with their leads, older searches' titles only."""
        last_search = max((i for i, t in enumerate(self.turns) if t.step.is_search), default=-1)
        lines = []
        for i, turn in enumerate(self.turns):
            step = turn.step
            call = f"{step.action or '?'}: {step.argument}" if step.argument else step.action
            shown = turn.short if step.is_search and i != last_search else turn.full
            observed = "\n".join("   " + line for line in shown.splitlines())
            lines.append(f"{i + 1}. {call or '(unreadable reply)'}\n{observed}")
        return "\n".join(lines) if lines else "(nothing yet)"

    def exact_repeats(self) -> int:
        """Searches whose keywords (case and spacing aside) an earlier search sent."""
        seen: set[str] = set()
        repeats = 0
        for step in self.steps:
            if step.is_search:
                key = " ".join(step.argument.casefold().split())
                repeats += key in seen
                seen.add(key)
        return repeats


class SearchAgent(_FramesProgram):
    """An agent over the run's retriever and article store: search, read, finish.

    Args:
        retriever: Has ``search(query, k, exclude=...)`` and a ``store`` whose ``resolve``
            finds an article by its title (both retrievers' stores do).
        max_steps: Actions before it must answer (malformed ones count).
        max_articles: Articles it may read before it must answer.
        max_agent_tokens: Metered tokens its steps may use before it must answer; counted by
            :func:`~frames_dspy.lm.accounting.own_meter`, as the record's tokens are (the
            answer call comes on top).
        n_docs: Results one search shows (articles already read are left out, as the
            fixed-rounds pipeline leaves out articles already in context).
        lead_chars: Characters of each result's opening shown.
        read_chars: Characters of a read article's opening the agent sees.
        context_tokens: Budget of the answer prompt's articles.
        cot: Answer with chain of thought.
    """

    KIND = "agent"
    NEEDS = ("retriever",)

    def __init__(
        self,
        retriever,
        *,
        max_steps: int = 10,
        max_articles: int = 8,
        max_agent_tokens: int = 8000,
        n_docs: int = 10,
        lead_chars: int = 120,
        read_chars: int = 600,
        context_tokens: int | None = None,
        cot: bool = False,
    ):
        super().__init__(context_tokens=context_tokens, cot=cot)
        limits = {
            "max_steps": max_steps,
            "max_articles": max_articles,
            "max_agent_tokens": max_agent_tokens,
            "n_docs": n_docs,
            "lead_chars": lead_chars,
            "read_chars": read_chars,
        }
        for name, value in limits.items():
            if value < 1:
                raise ValueError(f"{name}={value} must be at least 1")
        self.retriever = retriever
        self.max_steps, self.max_articles = max_steps, max_articles
        self.max_agent_tokens = max_agent_tokens
        self.n_docs, self.lead_chars, self.read_chars = n_docs, lead_chars, read_chars
        self.choose = dspy.Predict(ChooseAction)

    def forward(self, question: str) -> dspy.Prediction:
        """Choose a tool, use it, observe what came back; again until the agent finishes or
        a limit ends it; then answer from the articles it read."""
        work = AgentWork(question)
        note_start()
        with own_meter() as meter:
            while (stop := self.stop_reason(work, meter)) is None:
                spent = meter.tokens
                choice = self.choose_action(work, meter)
                turn = self.act(choice, work)
                turn.step.tokens = meter.tokens - spent
                work.observe(turn)
        note_stop(stop)
        answer, packed = self._answer(question, work.articles)
        return self._prediction(work, stop, answer, packed)

    # --- the steps ------------------------------------------------------------------------

    def stop_reason(self, work: AgentWork, meter: QuestionMeter) -> str | None:
        """Why the agent stops now, or None: it finished, or it read its last article,
        spent its tokens or took its last step (checked in that order)."""
        steps = work.steps
        if steps and steps[-1].action == FINISH:
            return "finish"
        if len(work.articles) >= self.max_articles:
            return "articles"
        if meter.tokens >= self.max_agent_tokens:
            return "tokens"
        if len(steps) >= self.max_steps:
            return "steps"
        return None

    def choose_action(self, work: AgentWork, meter: QuestionMeter) -> Choice:
        """One call of the model: the tool it chooses next and the argument, tidied."""
        limits = (
            f"steps left: {self.max_steps - len(work.turns)}; articles you may still read: "
            f"{self.max_articles - len(work.articles)}; tokens left: about "
            f"{max(0, self.max_agent_tokens - meter.tokens)}"
        )
        try:
            out = self.choose(question=work.question, steps=work.view(), limits=limits)
        except AdapterParseError as err:
            logger.info("an agent step could not be parsed: %s", err)
            return Choice("", problem="your reply could not be read")
        return _tidy(out.tool, out.argument)

    def act(self, choice: Choice, work: AgentWork) -> _Turn:
        """Use the chosen tool; a malformed call is answered with what was wrong with it."""
        if choice.problem is not None:
            return _error(choice, "unreadable", f"{choice.problem}; give a tool and argument")
        if choice.tool == FINISH:
            return _Turn(AgentStep(FINISH, choice.argument), "(finished)", "(finished)")
        if choice.tool not in (SEARCH, READ):
            return _error(choice, "unknown_tool", "no such tool; use search, read or finish")
        if not choice.argument:
            what = "keywords" if choice.tool == SEARCH else "a title"
            return _error(choice, "no_argument", f"{choice.tool} needs {what}")
        if choice.tool == SEARCH:
            return self.search(choice.argument, work)
        return self.read(choice.argument, work)

    def search(self, query: str, work: AgentWork) -> _Turn:
        """The top ``n_docs`` articles for the keywords, articles already read left out."""
        hits = self.retriever.search(query, self.n_docs, exclude=work.read_ids)
        work.latest = list(hits)  # what a number names from now on
        if not hits:
            note = "no article matches these keywords; try other words"
            return _Turn(AgentStep(SEARCH, query, "no_results", note), note, note)
        store = self.retriever.store
        lines = [
            f"[{n}] {hit.title}: {_opening(store[hit.article_id].text, self.lead_chars)}"
            for n, hit in enumerate(hits, start=1)
        ]
        titles = "; ".join(hit.title for hit in hits)
        step = AgentStep(SEARCH, query, "ok", titles, [hit.article_id for hit in hits])
        return _Turn(step, "\n".join(lines), f"found: {titles}")

    def read(self, title: str, work: AgentWork) -> _Turn:
        """The article named by its title (or its number in the latest results) joins the
        answer's context; the agent sees its opening."""
        article = self.find_article(title, work.latest)
        if article is None:
            note = f"no article is titled {title!r}; read a title from the search results"
            return _Turn(AgentStep(READ, title, "unknown_title", note), note, note)
        if article.id in work.read_ids:
            note = f"{article.title} is already read; its text is kept for the answer"
            step = AgentStep(READ, title, "already_read", note, [article.id])
            return _Turn(step, note, note)
        work.articles.append(article)
        seen = f"{article.title}: {_opening(article.text, self.read_chars)}"
        step = AgentStep(READ, title, "ok", seen[:_NOTE_CHARS], [article.id])
        return _Turn(step, seen, seen)

    def find_article(self, title: str, latest: Sequence[Hit]) -> Article | None:
        """The article a read names: a result's number, a title the store resolves, or a
        results line copied whole (``[2] Title: its opening…``)."""
        store = self.retriever.store
        number = _RESULT_NUMBER.fullmatch(title.strip())
        if number and 1 <= int(number.group(1)) <= len(latest):
            return store[latest[int(number.group(1)) - 1].article_id]
        copied = _RESULT_LINE.sub("", title)
        for candidate in dict.fromkeys((title, copied, copied.split(": ", 1)[0])):
            if candidate and (article := store.resolve(candidate)) is not None:
                return article
        return None

    def _prediction(
        self, work: AgentWork, stop: str, answer: str, packed: PackedContext | None
    ) -> dspy.Prediction:
        counts = AgentCounts.of(work.steps)
        return dspy.Prediction(
            answer=answer,
            context_ids=work.context_ids,
            queries=work.queries,
            query_stats={"generated": counts.searches, "repeated": work.exact_repeats()},
            packing=packed.summary() if packed else None,
            trajectory=work.steps,
            stop_reason=stop,
        )


def _opening(text: str, chars: int) -> str:
    """An article's first ``chars`` characters on one line, marked where they were cut."""
    flat = " ".join(text[: chars * 2].split())
    return flat if len(flat) <= chars else flat[:chars].rstrip() + "…"


def _error(choice: Choice, outcome: str, note: str) -> _Turn:
    step = AgentStep(choice.tool, choice.argument, outcome, note)
    return _Turn(step, f"error: {note}", f"error: {note}")


def _called(name: str, text: str) -> str | None:
    """The argument of a call of the tool ``name`` written out in ``text`` (``name: x``,
    ``name(x)``), or None when ``text`` is not one."""
    call = re.match(rf"\W*{re.escape(name)}\s*(?::|\((.*)\)\W*$)", text, re.IGNORECASE | re.DOTALL)
    if not name or call is None:
        return None
    return (call.group(1) if call.group(1) is not None else text[call.end() :]).strip()


def _tidy(tool: object, argument: object) -> Choice:
    """The tool's name and its argument without quotes, extra spaces or a JSON object
    around it. A tool written as a call (``search("x")``, ``read: Title``, ``read Title``)
    gives its argument when the argument field is empty, and an argument that repeats the
    call (``search: x``, as the steps the model is shown write one) loses the tool's name."""
    call = _CALL.match(str(tool or ""))
    name, rest = (call.group(1).casefold(), call.group(2).strip(" :")) if call else ("", "")
    if rest.startswith("(") and rest.endswith(")"):
        rest = rest[1:-1]
    written = str(argument or "").strip()
    called = _called(name, written)
    value = (written if called is None else called) or rest.strip()
    if value.startswith("{"):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            value = next((str(v) for v in parsed.values() if isinstance(v, str | int)), "")
    value = " ".join(value.strip().strip("\"'`").split())[:_ARGUMENT_CHARS]
    return Choice(name, value)
