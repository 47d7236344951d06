"""What a run will cost, told before it starts, and what it has cost so far.

The estimate prices one question of each program kind from its shape (rounds, queries,
documents, the article budget) with the fixed token counts in :data:`ASSUMPTIONS`: rough by
design, meant to tell a coffee break from a week and a cent from a hundred dollars. Dollars
come from LiteLLM's bundled price map when it knows the model (API models only; the embedded
model costs nothing but time).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from frames_dspy.lm import ModelSpec
from frames_dspy.lm.accounting import CHARS_PER_TOKEN
from frames_dspy.programs import ProgramSpec
from frames_dspy.results.records import QuestionRecord

logger = logging.getLogger(__name__)

__all__ = [
    "ASSUMPTIONS",
    "QuestionCost",
    "question_cost",
    "multihop_cost",
    "agent_cost",
    "Pricer",
    "SpendMeter",
    "estimate_lines",
]

#: Prompt tokens of each call's fixed part (instructions, field headers, the question).
QUERY_PROMPT = {"vanilla": 450, "planning": 800, "titles": 500}
QUERY_OUTPUT = {"vanilla": 40, "planning": 150, "titles": 40}
ANSWER_PROMPT = 300
ANSWER_OUTPUT = 20
JUDGE_PROMPT = 350
JUDGE_OUTPUT = 60
#: Tokens per article in the query writer's compact view (title and lead), capped at
#: MultiHop's ``found_tokens`` (1000).
FOUND_PER_ARTICLE = 40
FOUND_CAP = 1000
#: An agent step: its fixed prompt (instructions, fields, question), its output (a thought,
#: a tool, an argument), and what each earlier step adds to later prompts in short form.
STEP_PROMPT = 500
STEP_OUTPUT = 60
STEP_HISTORY = 40

ASSUMPTIONS = (
    "query call = {q_v}/{q_p}/{q_t} prompt tokens (vanilla/planning/titles) + 40 per article "
    "found so far (capped at 1000) and {o_v}/{o_p}/{o_t} output; agent step = {s} + 40 per "
    "search result shown + {h} per earlier step + half a read's opening per earlier step, "
    "and {so} output, every step taken until --max-agent-tokens is reached; answer call = "
    "{a} + the article budget (--context-tokens; whole articles always fill it) and {ao} "
    "output; judge call = {j} + {jo}, assumed for every question (rules settle many "
    "without it)"
).format(
    s=STEP_PROMPT,
    h=STEP_HISTORY,
    so=STEP_OUTPUT,
    q_v=QUERY_PROMPT["vanilla"],
    q_p=QUERY_PROMPT["planning"],
    q_t=QUERY_PROMPT["titles"],
    o_v=QUERY_OUTPUT["vanilla"],
    o_p=QUERY_OUTPUT["planning"],
    o_t=QUERY_OUTPUT["titles"],
    a=ANSWER_PROMPT,
    ao=ANSWER_OUTPUT,
    j=JUDGE_PROMPT,
    jo=JUDGE_OUTPUT,
)


@dataclass(frozen=True)
class QuestionCost:
    """Program LM calls and tokens for one question (the judge is priced apart)."""

    calls: float
    prompt_tokens: float
    completion_tokens: float

    @property
    def tokens(self) -> float:
        return self.prompt_tokens + self.completion_tokens


def multihop_cost(
    rounds: int,
    k: int,
    n_docs: int,
    prompt: str,
    *,
    context_tokens: int,
    include_question: bool,
    question_docs: int | None = None,
    phrase_docs: int | None = None,
    lm_from_round: int | None = None,
    answer: bool = True,
) -> QuestionCost:
    """One question of MultiHop: a query call per round (none when the question is the only
    query), then one answer call (none with ``answer=False``: the retrieval half alone)."""
    writes = k - 1 if include_question else k
    per_round = k * n_docs
    if include_question and question_docs is not None:
        per_round = question_docs + (phrase_docs or 0) + (k - 1) * n_docs
    calls = prompt_tokens = completion = 0.0
    if writes > 0:
        for r in range((lm_from_round or 1) - 1, rounds):
            found = min(FOUND_CAP, FOUND_PER_ARTICLE * r * per_round)
            calls += 1
            prompt_tokens += QUERY_PROMPT[prompt] + found
            completion += QUERY_OUTPUT[prompt]
    return _then_answer(QuestionCost(calls, prompt_tokens, completion), context_tokens, answer)


def agent_cost(
    max_steps: int,
    n_docs: int,
    read_chars: int,
    max_agent_tokens: int,
    *,
    context_tokens: int,
    answer: bool = True,
) -> QuestionCost:
    """One question of the agent at its limits: a step call for every step it may take,
    each prompt holding the latest results and the earlier steps (every other one a read),
    until the steps' tokens reach ``max_agent_tokens`` (the step that crosses it counts, as
    it does when the agent runs); then one answer call (none with ``answer=False``). An
    upper bound: an agent that finishes early costs less."""
    calls = prompt_tokens = completion = 0.0
    per_step = STEP_HISTORY + read_chars / CHARS_PER_TOKEN / 2
    for step in range(max_steps):
        if prompt_tokens + completion >= max_agent_tokens:
            break
        calls += 1
        prompt_tokens += STEP_PROMPT + n_docs * FOUND_PER_ARTICLE + step * per_step
        completion += STEP_OUTPUT
    return _then_answer(QuestionCost(calls, prompt_tokens, completion), context_tokens, answer)


def _then_answer(search: QuestionCost, context_tokens: int, answer: bool) -> QuestionCost:
    """A program's search calls, then its answer call over ``context_tokens`` of articles
    (none without the answer step)."""
    if not answer:
        return search
    return QuestionCost(
        search.calls + 1,
        search.prompt_tokens + ANSWER_PROMPT + context_tokens,
        search.completion_tokens + ANSWER_OUTPUT,
    )


def question_cost(spec: ProgramSpec, *, answer: bool = True) -> QuestionCost:
    """One question of any program (its spec's budget must be set for kinds with articles);
    ``answer=False``: the retrieval half alone (``--retrieval-only``), no answer call."""
    if spec.kind == "agent":
        return agent_cost(
            spec.max_steps,
            spec.n_docs,
            spec.read_chars,
            spec.max_agent_tokens,
            context_tokens=spec.context_tokens,
            answer=answer,
        )
    if spec.kind == "multihop":
        return multihop_cost(
            spec.rounds,
            spec.k,
            spec.n_docs,
            spec.query_prompt,
            context_tokens=spec.context_tokens,
            include_question=spec.include_question,
            question_docs=spec.question_docs,
            phrase_docs=spec.phrase_docs,
            lm_from_round=spec.lm_from_round,
            answer=answer,
        )
    if not answer:
        return QuestionCost(0, 0, 0)
    articles = spec.context_tokens if spec.takes("context_tokens") else 0
    return QuestionCost(1, ANSWER_PROMPT + (articles or 0), ANSWER_OUTPUT)


class Pricer:
    """Dollars for tokens of one model, from LiteLLM's bundled price map; None if unknown."""

    def __init__(self, model: ModelSpec | None):
        self.model = model
        # Only "provider/model" strings can be in LiteLLM's map (an injected test LM's name
        # cannot); asking costs a LiteLLM import, seconds on a cold start.
        priceable = model is not None and not model.embedded and "/" in model.value
        self._known: bool | None = None if priceable else False

    def __call__(self, prompt_tokens: float, completion_tokens: float) -> float | None:
        if self._known is False:
            return None
        from frames_dspy.lm.litellm_setup import _import_litellm

        litellm = _import_litellm()
        try:
            prompt, completion = litellm.cost_per_token(
                model=self.model.value,
                prompt_tokens=int(prompt_tokens),
                completion_tokens=int(completion_tokens),
            )
        except Exception as err:  # noqa: BLE001 - LiteLLM raises plain Exception when unmapped
            logger.debug("no price known for %s: %s", self.model.value, err)
            self._known = False
            return None
        self._known = True
        return float(prompt + completion)


class SpendMeter:
    """Adds up what finished questions cost (reported tokens, so cached calls cost nothing).

    Use it as a runner hook: it sets the record's ``cost_usd`` when a price is known.
    """

    def __init__(self, program: Pricer, judge: Pricer):
        self.program, self.judge = program, judge
        self.tokens = 0
        self.dollars: float | None = None
        self._lock = threading.Lock()

    def __call__(self, record: QuestionRecord) -> None:
        prompt, completion = record.prompt_tokens, record.completion_tokens
        judge_prompt, judge_completion = record.judge_prompt_tokens, record.judge_completion_tokens
        costs = [self.program(prompt, completion), self.judge(judge_prompt, judge_completion)]
        known = [c for c in costs if c is not None]
        with self._lock:
            self.tokens += prompt + completion + judge_prompt + judge_completion
            if known:
                record.cost_usd = sum(known)
                self.dollars = (self.dollars or 0.0) + record.cost_usd


def estimate_lines(
    specs: Mapping[str, ProgramSpec],
    todo: Mapping[str, int],
    program: Pricer,
    judge: Pricer,
    *,
    retrieval_only: bool = False,
) -> list[str]:
    """The printed estimate: LM calls, tokens and dollars per condition and in all
    (``retrieval_only``: the query calls alone, no answer or judge call)."""
    head = "query calls only" if retrieval_only else "program + judge LM"
    lines = [f"Cost estimate before any LM call (rough; {head}):"]
    judged = 0 if retrieval_only else 1
    total_calls = total_tokens = 0.0
    total_dollars: float | None = None
    for label, spec in specs.items():
        n = todo.get(label, 0)
        one = question_cost(spec, answer=not retrieval_only)
        calls = n * (one.calls + judged)
        prompt = n * (one.prompt_tokens + judged * JUDGE_PROMPT)
        completion = n * (one.completion_tokens + judged * JUDGE_OUTPUT)
        dollars = [
            program(n * one.prompt_tokens, n * one.completion_tokens),
            judge(n * judged * JUDGE_PROMPT, n * judged * JUDGE_OUTPUT),
        ]
        priced = [d for d in dollars if d is not None]
        money = f"  ~${sum(priced):,.2f}" if priced else ""
        if priced:
            total_dollars = (total_dollars or 0.0) + sum(priced)
        total_calls += calls
        total_tokens += prompt + completion
        lines.append(
            f"  {label:<20} {n:>5} questions  ~{calls:>8,.0f} LM calls  "
            f"~{prompt + completion:>12,.0f} tokens ({one.tokens:,.0f}/question){money}"
        )
    money = f"  ~${total_dollars:,.2f}" if total_dollars is not None else ""
    lines.append(
        f"  {'total':<20} {sum(todo.values()):>5} questions  ~{total_calls:>8,.0f} LM calls  "
        f"~{total_tokens:>12,.0f} tokens{money}"
    )
    if total_dollars is None:
        lines.append("  (no price known for these models: tokens only)")
    lines.append(f"  assumptions: {ASSUMPTIONS}")
    return lines
