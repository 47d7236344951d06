"""The evaluation's settings: every option of ``python -m frames_dspy.evaluate``, declared once.

:class:`EvalConfig` adds what to run, which questions and the run's own knobs to the model and
data settings (:class:`~frames_dspy.run.session.ModelDataSettings`); argparse options,
``config.json``, the reproduce command and ``docs/settings.md`` are all derived from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from frames_dspy.base.settings import resume_keys, setting
from frames_dspy.programs import CONDITIONS, MORE_CONDITIONS
from frames_dspy.programs.spec import kind_settings
from frames_dspy.run.settings import RunSettings

__all__ = ["EvalConfig", "RESUME_KEYS"]

_EVALUATE = ("evaluate",)
_WHAT, _WHICH, _RUN = "what to run", "which questions", "run"
#: The agent's settings with their defaults, declared by its class (SearchAgent).
_AGENT = kind_settings("agent")


@dataclass(frozen=True)
class EvalConfig(RunSettings):
    """Every knob of an evaluation run (written to the run's ``config.json``).

    Attributes:
        conditions: Names from :data:`~frames_dspy.programs.CONDITIONS`, plus ``program``
            for a saved program (``program`` names its file).
        split, train, dev, seed: Which questions: all, or one part of the seeded split.
        limit, ids: The first N selected questions, or these ids.
        rounds, k, n_docs, question_docs, phrase_docs: Multi-step knobs (with
            ``include_question`` and ``cot``, for every condition, from
            :class:`~frames_dspy.run.settings.RunSettings`).
        max_steps, max_articles, max_agent_tokens: The agent's limits (``n_docs`` is also
            its results per search).
        no_lm_parts: Also run each LM-writing program's no-LM parts alone (``NAME-no-lm``).
        retrieval_only: Run only the retrieval half of every program (no answer call, so no
            judge call: accuracy is not measured, recall and query tokens are). Recall
            cannot depend on the answer step, so this measures it at a fraction of the cost.
        out: The run folder; None means ``runs/<timestamp>``.
        max_failure_rate: Above this share of failed questions in a condition the command
            reports the run as failed (exit status 1); the records stay.
        max_cost: Stop starting questions once this many dollars were spent (API models
            LiteLLM can price; ``max_lm_calls`` bounds the calls); finished questions are kept
            and a rerun continues.
    """

    conditions: list[str] = setting(
        default_factory=lambda: list(CONDITIONS),
        kind="condition_list",
        group=_WHAT,
        entries=_EVALUATE,
        help=f"comma-separated; default the paper's: {','.join(CONDITIONS)}; also "
        f"{','.join(MORE_CONDITIONS)} (the LM searches, reads and stops by itself), bm25-N for "
        "the top N articles for the question (any N >= 1, e.g. bm25-12) and phrases-N (no "
        "LM: the question's capitalised phrases as extra queries, N articles)",
    )
    split: str = setting(
        "all",
        group=_WHICH,
        entries=_EVALUATE,
        choices=("all", "train", "dev", "test"),
        help="a seeded stratified split (sizes --train/--dev; test is the rest)",
    )
    train: int = setting(
        50,
        kind="non_negative_int",
        group=_WHICH,
        entries=_EVALUATE,
        help="train questions of the split (default %(default)s; optimize.compile's default is "
        "20, different on purpose: pass a compile run's --train/--dev to score its test split, "
        "as its reproduce command does)",
    )
    dev: int = setting(
        50,
        kind="non_negative_int",
        group=_WHICH,
        entries=_EVALUATE,
        help="dev questions of the split (default %(default)s; optimize.compile's is 20, see "
        "--train)",
    )
    limit: int | None = setting(
        None,
        kind="positive_int",
        group=_WHICH,
        entries=_EVALUATE,
        help="first N selected questions",
    )
    ids: list[int] | None = setting(
        None,
        kind="id_list",
        group=_WHICH,
        entries=_EVALUATE,
        help="question ids, e.g. 0,5,7-9",
    )
    rounds: int = setting(
        5,
        kind="positive_int",
        group=_WHAT,
        entries=_EVALUATE,
        help="multi-step rounds (default %(default)s, the paper's)",
        resume=("evaluate",),
    )
    k: int = setting(
        5,
        kind="positive_int",
        group=_WHAT,
        entries=_EVALUATE,
        help="queries per round (default %(default)s)",
        resume=("evaluate",),
    )
    n_docs: int = setting(
        10,
        kind="positive_int",
        group=_WHAT,
        entries=_EVALUATE,
        help="articles per query per round (default %(default)s); the agent's results per search",
        resume=("evaluate",),
    )
    question_docs: int | None = setting(
        None,
        kind="positive_int",
        group=_WHAT,
        entries=_EVALUATE,
        help="articles the question's own query brings per round (default: --n-docs, like "
        "any query); it also fills the slots the written queries leave unused, so a round "
        "adds exactly question_docs + (k-1) x n_docs articles, comparable with bm25-N",
        resume=("evaluate",),
    )
    phrase_docs: int | None = setting(
        None,
        kind="positive_int",
        group=_WHAT,
        entries=_EVALUATE,
        help="articles the question's capitalised phrases bring per round, a no-LM query "
        "source beside the question and the LM (needs --question-docs; default: none)",
        resume=("evaluate",),
    )
    max_steps: int = setting(
        _AGENT["max_steps"],
        kind="positive_int",
        group=_WHAT,
        entries=_EVALUATE,
        help="agent: actions (search, read, finish, or a malformed call) before it must "
        "answer (default %(default)s)",
        resume=("evaluate",),
    )
    max_articles: int = setting(
        _AGENT["max_articles"],
        kind="positive_int",
        group=_WHAT,
        entries=_EVALUATE,
        help="agent: articles it may read before it must answer (default %(default)s)",
        resume=("evaluate",),
    )
    max_agent_tokens: int = setting(
        _AGENT["max_agent_tokens"],
        kind="positive_int",
        group=_WHAT,
        entries=_EVALUATE,
        help="agent: metered tokens its steps may use before it must answer; the answer call "
        "comes on top (default %(default)s)",
        resume=("evaluate",),
    )
    retrieval_only: bool = setting(
        False,
        kind="flag",
        group=_WHAT,
        entries=_EVALUATE,
        help="run only the retrieval half of each program: no answer and no judge call, so "
        "accuracy is not measured (every answer is empty) but recall and query tokens are",
        resume=("evaluate",),
    )
    no_lm_parts: bool = setting(
        False,
        kind="flag",
        group=_WHAT,
        entries=_EVALUATE,
        help="also run each program that writes LM queries with its query writer off "
        "(condition NAME-no-lm): its no-LM parts alone (the question, its phrases) at the "
        "same article budget, no query call, so the table shows what the LM's queries add",
        resume=("evaluate",),
    )
    program: str | None = setting(
        None,
        group=_WHAT,
        entries=_EVALUATE,
        help="a program.json from optimize.compile, run as condition 'program' "
        "(alone unless --conditions is also given)",
        resume=("evaluate",),
    )
    out: str | None = setting(
        None,
        group=_RUN,
        entries=_EVALUATE,
        help="run folder (default runs/<timestamp>); an existing one is resumed",
    )
    seed: int = setting(0, kind="int", group=_RUN, entries=_EVALUATE, help="split seed")
    max_failure_rate: float = setting(
        0.05,
        kind="fraction",
        group=_RUN,
        entries=_EVALUATE,
        help="exit with status 1, loudly, when more than this share of a condition's "
        "questions failed (default %(default)s); the records stay",
    )
    max_cost: float | None = setting(
        None,
        kind="positive_float",
        group=_RUN,
        entries=_EVALUATE,
        metavar="DOLLARS",
        help="start no question once this much was spent (API models LiteLLM can price)",
    )


#: Settings that change what a prediction means: a run folder only resumes when they match
#: (declared with ``resume``).
RESUME_KEYS = resume_keys(EvalConfig, "evaluate")
