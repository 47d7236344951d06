"""What a study of ``optimize.compile`` searches: the program kinds, their knobs, and the spec
a trial's parameters describe.

A trial of the multi-step program (:class:`~frames_dspy.programs.MultiHop`) chooses
``rounds``, ``k``, ``n_docs`` and the query prompt (vanilla, planning or titles), and more when
asked; a trial of the agent (:class:`~frames_dspy.programs.SearchAgent`) chooses its limits
(``max_steps``, ``max_articles``, ``max_agent_tokens``) and the results one search shows
(``n_docs``, the same range as the multi-step program's articles per query). The agent has one
step prompt (``ChooseAction``): the DSPy optimizer tunes it after the pick, so the study does
not choose between prompts for it. A study of one kind stores no ``kind`` parameter for
``multihop``, so a study made before the agent existed still resumes.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import optuna

from frames_dspy.programs import ProgramSpec, lm_queries_per_round
from optimize.optimizers import GOLD_OPTIMIZERS

__all__ = [
    "KINDS",
    "PAPER_PROMPTS",
    "PROMPTS",
    "SearchSpace",
    "KIND_SETTINGS",
    "check_kinds",
    "searches_by_lm",
    "trial_kind",
    "trial_label",
    "trial_spec",
]

#: The query-writing prompts a multi-step trial chooses between.
PROMPTS = ("vanilla", "planning", "titles")
#: The paper's two prompts: what a study tries unless told otherwise.
PAPER_PROMPTS = PROMPTS[:2]
#: The program kinds a study can search: the paper's multi-step program and the agent.
KINDS = ("multihop", "agent")
#: The search settings (``optimize.compile``'s) that shape one kind's trials only.
KIND_SETTINGS = {
    "multihop": (
        "rounds", "k", "prompts", "search_question_query", "found_tokens", "question_docs",
        "phrase_docs", "lm_from_round",
    ),
    "agent": ("max_steps", "max_articles", "max_agent_tokens"),
}  # fmt: skip


@dataclass(frozen=True)
class SearchSpace:
    """Inclusive integer ranges for the knobs, and the choices for the others.

    ``kinds`` are the program kinds tried (:data:`KINDS`). For ``multihop``: ``rounds``, ``k``
    and ``n_docs`` are ranges; ``prompts`` (vanilla, planning), ``question_query`` (whether
    the question is one of each round's queries), ``found_tokens`` (the budget of the
    found-articles view the query writer reads) and ``lead_chars`` (how much of each
    article's opening it shows) are lists of choices; a one-item list fixes that knob.
    ``question_docs`` (the articles the question's own query brings per round, see
    :class:`~frames_dspy.programs.MultiHop`) is a list of choices too; empty (the default)
    leaves it unset: the question gets ``n_docs`` like any query. ``phrase_docs`` (the
    articles the question's phrases bring per round; 0: none) likewise, with
    ``question_docs``, and ``lm_from_round`` (the first round the LM writes in). With the
    question as a query, ``k = 1`` is a program that sends no LM query, so a study can find
    that the LM adds nothing. For ``agent``: ``max_steps`` and ``max_articles`` are ranges,
    ``max_agent_tokens`` choices; ``n_docs`` (results per search) and ``lead_chars`` (each
    result's opening) are shared with the multi-step program.
    """

    rounds: tuple[int, int] = (1, 5)
    k: tuple[int, int] = (1, 5)
    n_docs: tuple[int, int] = (1, 10)
    prompts: tuple[str, ...] = PAPER_PROMPTS
    question_query: tuple[bool, ...] = (True,)
    found_tokens: tuple[int, ...] = (1000,)
    lead_chars: tuple[int, ...] = (120,)
    question_docs: tuple[int, ...] = ()
    phrase_docs: tuple[int, ...] = ()
    lm_from_round: tuple[int, ...] = ()
    kinds: tuple[str, ...] = ("multihop",)
    max_steps: tuple[int, int] = (4, 12)
    max_articles: tuple[int, int] = (2, 8)
    max_agent_tokens: tuple[int, ...] = (8000,)

    def __post_init__(self):
        unknown = [kind for kind in self.kinds if kind not in KINDS]
        if unknown or not self.kinds:
            raise ValueError(f"unknown program kind(s) {unknown}; choose from {list(KINDS)}")
        for name in ("rounds", "k", "n_docs", "max_steps", "max_articles"):
            low, high = getattr(self, name)
            if not 1 <= low <= high:
                raise ValueError(f"search range {name}={low}..{high} must satisfy 1 <= low <= high")
        unknown = [p for p in self.prompts if p not in PROMPTS]
        if unknown or not self.prompts:
            raise ValueError(f"unknown prompt(s) {unknown}; choose from {list(PROMPTS)}")
        for name in ("question_query", "found_tokens", "lead_chars", "max_agent_tokens"):
            if not getattr(self, name):
                raise ValueError(f"search choices for {name} must not be empty")
        for name in (
            "found_tokens",
            "lead_chars",
            "question_docs",
            "lm_from_round",
            "max_agent_tokens",
        ):
            bad = [v for v in getattr(self, name) if isinstance(v, bool) or v < 1]
            if bad:
                raise ValueError(f"search choices {name}={bad} must be whole numbers >= 1")
        if any(isinstance(v, bool) or v < 0 for v in self.phrase_docs):
            raise ValueError(f"search choices phrase_docs={self.phrase_docs} must be >= 0")

    @property
    def names_kind(self) -> bool:
        """Whether a trial's parameters name its kind (the agent is searched)."""
        return self.kinds != ("multihop",)

    def suggest(self, trial: optuna.Trial) -> dict[str, Any]:
        """Ask the trial for one configuration (parameter names as stored in the study)."""
        if not self.names_kind:
            return self._suggest_multihop(trial)
        kind = trial.suggest_categorical("kind", list(self.kinds))
        suggest = self._suggest_agent if kind == "agent" else self._suggest_multihop
        return {"kind": kind, **suggest(trial)}

    def _suggest_multihop(self, trial: optuna.Trial) -> dict[str, Any]:
        params = {
            "rounds": trial.suggest_int("rounds", *self.rounds),
            "k": trial.suggest_int("k", *self.k),
            "n_docs": trial.suggest_int("n_docs", *self.n_docs),
            "prompt": trial.suggest_categorical("prompt", list(self.prompts)),
            "question_query": trial.suggest_categorical(
                "question_query", list(self.question_query)
            ),
            "found_tokens": trial.suggest_categorical("found_tokens", list(self.found_tokens)),
            "lead_chars": trial.suggest_categorical("lead_chars", list(self.lead_chars)),
        }
        for name in ("question_docs", "phrase_docs", "lm_from_round"):
            if getattr(self, name):
                params[name] = trial.suggest_categorical(name, list(getattr(self, name)))
        return params

    def _suggest_agent(self, trial: optuna.Trial) -> dict[str, Any]:
        return {
            "max_steps": trial.suggest_int("max_steps", *self.max_steps),
            "max_articles": trial.suggest_int("max_articles", *self.max_articles),
            "max_agent_tokens": trial.suggest_categorical(
                "max_agent_tokens", list(self.max_agent_tokens)
            ),
            "n_docs": trial.suggest_int("n_docs", *self.n_docs),
            "lead_chars": trial.suggest_categorical("lead_chars", list(self.lead_chars)),
        }

    def configurations(self) -> Iterator[dict[str, Any]]:
        """Every configuration in the space (used by the cost estimate); the lists of
        choices the cost does not depend on contribute their first choice."""
        named = {"kind": "multihop"} if self.names_kind else {}
        first = {
            name: getattr(self, name)[0]
            for name in ("question_docs", "phrase_docs", "lm_from_round")
            if getattr(self, name)
        }
        if "multihop" in self.kinds:
            for rounds, k, n_docs, prompt, question_query in itertools.product(
                _span(self.rounds), _span(self.k), _span(self.n_docs), self.prompts,
                self.question_query,
            ):  # fmt: skip
                yield {
                    **named,
                    "rounds": rounds,
                    "k": k,
                    "n_docs": n_docs,
                    "prompt": prompt,
                    "question_query": question_query,
                    "found_tokens": self.found_tokens[0],
                    "lead_chars": self.lead_chars[0],
                    **first,
                }
        if "agent" in self.kinds:
            for steps, articles, tokens, n_docs in itertools.product(
                _span(self.max_steps), _span(self.max_articles), self.max_agent_tokens,
                _span(self.n_docs),
            ):  # fmt: skip
                yield {
                    "kind": "agent",
                    "max_steps": steps,
                    "max_articles": articles,
                    "max_agent_tokens": tokens,
                    "n_docs": n_docs,
                    "lead_chars": self.lead_chars[0],
                }

    def as_dict(self) -> dict[str, Any]:
        return {
            "rounds": list(self.rounds),
            "k": list(self.k),
            "n_docs": list(self.n_docs),
            "prompts": list(self.prompts),
            "question_query": list(self.question_query),
            "found_tokens": list(self.found_tokens),
            "lead_chars": list(self.lead_chars),
            # Only when searched, so a study made before the knob existed still resumes.
            **({"question_docs": list(self.question_docs)} if self.question_docs else {}),
            **({"phrase_docs": list(self.phrase_docs)} if self.phrase_docs else {}),
            **({"lm_from_round": list(self.lm_from_round)} if self.lm_from_round else {}),
            **(
                {
                    "kinds": list(self.kinds),
                    "max_steps": list(self.max_steps),
                    "max_articles": list(self.max_articles),
                    "max_agent_tokens": list(self.max_agent_tokens),
                }
                if self.names_kind
                else {}
            ),
        }


def _span(bounds: tuple[int, int]) -> range:
    return range(bounds[0], bounds[1] + 1)


def trial_kind(params: dict[str, Any]) -> str:
    """The program kind of a trial's parameters (``multihop`` when they name none)."""
    return str(params.get("kind", "multihop"))


def trial_spec(
    params: dict[str, Any],
    *,
    include_question: bool = True,
    cot: bool = False,
    context_tokens: int | None = None,
) -> ProgramSpec:
    """The program spec for a trial's parameters.

    ``include_question`` applies when a multi-step trial did not choose ``question_query``
    (a study made before that was searched); the found view keeps the program's defaults
    likewise. The agent never sends the question by itself, so ``include_question`` does not
    apply to it.
    """
    if trial_kind(params) == "agent":
        return ProgramSpec(
            "agent",
            max_steps=int(params["max_steps"]),
            max_articles=int(params["max_articles"]),
            max_agent_tokens=int(params["max_agent_tokens"]),
            n_docs=int(params["n_docs"]),
            lead_chars=params.get("lead_chars"),
            cot=cot,
            context_tokens=context_tokens,
        )
    asks_question = bool(params.get("question_query", include_question))
    question_docs = params.get("question_docs") if asks_question else None
    phrases, from_round = params.get("phrase_docs"), params.get("lm_from_round", 1)
    return ProgramSpec(
        "multihop",
        rounds=int(params["rounds"]),
        k=int(params["k"]),
        n_docs=int(params["n_docs"]),
        planning=params["prompt"] == "planning",
        titles=params["prompt"] == "titles",
        include_question=asks_question,
        question_docs=int(question_docs) if question_docs else None,
        phrase_docs=int(phrases) if question_docs and phrases else None,
        lm_from_round=int(from_round) if from_round > 1 else None,
        cot=cot,
        context_tokens=context_tokens,
        found_tokens=params.get("found_tokens"),
        lead_chars=params.get("lead_chars"),
    )


def trial_label(params: dict[str, Any]) -> str:
    """A trial's short label: ``planning r3 k2 n4`` (with ``f``/``l``, the found view, and
    ``-q``, no question query, where the study searched them) or ``agent s6 a4 t8000 n5``
    (steps, articles, tokens, results per search; ``l``: the results' leads)."""
    spec = trial_spec(params)
    label = spec.describe().removeprefix("multihop ")
    if spec.kind == "agent":
        return label + (f" l{spec.lead_chars}" if "lead_chars" in params else "")
    if "found_tokens" in params:
        label += f" f{spec.found_tokens} l{spec.lead_chars}" + (
            "" if spec.include_question else " -q"
        )
    return label


def check_kinds(values: Mapping[str, Any], defaults: Mapping[str, Any]) -> None:
    """Refuse settings that do not fit the kinds a study tries (``values["kinds"]``): a
    search setting of a kind it does not try, away from its default (it would change
    nothing), and a gold optimizer beside the agent (gold demos are the multi-step query
    writer's; the agent has none).

    Raises:
        ValueError: naming the setting and the fix.
    """
    kinds = tuple(values["kinds"])
    if "agent" in kinds and values["optimizer"] in GOLD_OPTIMIZERS:
        raise ValueError(
            f"--optimizer {values['optimizer']} writes demos for the multihop query writer and "
            "the agent has none: choose bootstrap-rs, mipro, gepa or simba, or drop agent "
            "from --kinds"
        )
    for kind, names in KIND_SETTINGS.items():
        for name in names:
            if kind not in kinds and _plain(values[name]) != _plain(defaults[name]):
                flag = "--" + name.replace("_", "-")
                raise ValueError(
                    f"{flag} shapes {kind} trials and --kinds {','.join(kinds)} tries none: "
                    f"add {kind} to --kinds or drop {flag}"
                )


def _plain(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def searches_by_lm(spec: ProgramSpec) -> bool:
    """Whether the program's LM decides what is searched (an agent, or a multi-step program
    that writes queries): it then has a prompt besides the answer step's for an optimizer to
    tune, and a program without one is not compiled."""
    return spec.kind == "agent" or lm_queries_per_round(spec) > 0
