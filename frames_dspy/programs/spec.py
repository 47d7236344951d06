"""What a program is, as data: a frozen :class:`ProgramSpec`, and the paper's conditions.

A spec names a program kind (``naive``, ``bm25``, ``oracle``, ``multihop``, ``agent`` ...) and
the settings that shape it, including the token budget of the answer prompt's articles. It
round-trips through a plain dict (``program.json``, run configs, Optuna trials), so a saved
program is rebuilt with exactly the settings it was scored with.

The settings each kind takes, with their defaults, are declared by the module class of that
kind (see :mod:`frames_dspy.programs.modules`), which registers itself here: adding a kind is
one class, adding a condition one entry in :mod:`frames_dspy.programs.conditions`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

__all__ = ["ProgramSpec", "register_kind", "kind_settings"]

# kind -> {setting: default}; filled in by the module classes as they are defined.
_KINDS: dict[str, dict[str, Any]] = {}


def register_kind(kind: str, settings: Mapping[str, Any]) -> None:
    """Declare a program kind and the settings (with defaults) its spec may carry."""
    unknown = set(settings) - {f.name for f in dataclasses.fields(ProgramSpec)} - {"kind"}
    if unknown:
        raise ValueError(f"kind {kind!r} declares settings ProgramSpec lacks: {sorted(unknown)}")
    _KINDS[kind] = dict(settings)


def kind_settings(kind: str) -> dict[str, Any]:
    """The settings a kind takes, with their defaults.

    Raises:
        ValueError: an unknown kind (the message lists the known ones).
    """
    if kind not in _KINDS:
        raise ValueError(
            f"unknown program kind {kind!r}; choose one of {', '.join(sorted(_KINDS)) or '?'}"
        )
    return dict(_KINDS[kind])


_POSITIVE = (
    "rounds",
    "k",
    "n_docs",
    "question_docs",
    "phrase_docs",
    "lm_from_round",
    "context_tokens",
    "found_tokens",
    "lead_chars",
    "max_steps",
    "max_articles",
    "max_agent_tokens",
    "read_chars",
)


@dataclass(frozen=True)
class ProgramSpec:
    """The shape of one FRAMES program; settings a kind does not take stay None.

    Attributes:
        kind: ``naive``, ``bm25``, ``phrases``, ``oracle``, ``multihop`` or ``agent``.
        rounds: Multi-step retrieval rounds.
        k: Queries per round (the question itself may be one of them).
        n_docs: Articles retrieved per query (``bm25``: for the question; ``agent``: the
            results one search shows).
        planning: The search-planning query prompt (and repeated queries dropped).
        titles: The article-title query prompt (``NameArticles``; repeats dropped).
        include_question: The question is one of each round's queries.
        question_docs: Articles the question's own query brings per round; None: ``n_docs``
            like any query. When set, the question also takes the slots the written queries
            leave unused, so a round adds exactly ``question_docs + (k - 1) * n_docs``.
        phrase_docs: Articles the question's capitalised phrases bring per round (a no-LM
            query source: the ``phrases-N`` logic as a program part); None: no phrase
            queries. Needs ``question_docs``; a round then adds exactly
            ``question_docs + phrase_docs + (k - 1) * n_docs`` articles.
        lm_from_round: The first round whose queries the LM writes; the rounds before send
            only the no-LM queries (with ``question_docs`` the question fills the LM's
            slots). None: from round 1.
        cot: Answer with chain of thought.
        context_tokens: Token budget of the articles in the answer prompt; None until the
            model is known (a run derives it from the model's window).
        found_tokens: Budget of the compact view (titles and leads) the query writer sees.
        lead_chars: Characters of each article's opening shown in that view (``agent``: in
            a search's results).
        max_steps: The agent's actions (search, read, finish, or a malformed call) before it
            must answer.
        max_articles: Articles the agent may read before it must answer.
        max_agent_tokens: Metered tokens the agent's steps may use before it must answer
            (the answer call comes on top).
        read_chars: Characters of an article the agent sees when it reads it (the answer
            step sees the whole article, packed like every condition's).
    """

    kind: str
    rounds: int | None = None
    k: int | None = None
    n_docs: int | None = None
    planning: bool | None = None
    titles: bool | None = None
    include_question: bool | None = None
    question_docs: int | None = None
    phrase_docs: int | None = None
    lm_from_round: int | None = None
    cot: bool | None = None
    context_tokens: int | None = None
    found_tokens: int | None = None
    lead_chars: int | None = None
    max_steps: int | None = None
    max_articles: int | None = None
    max_agent_tokens: int | None = None
    read_chars: int | None = None

    def __post_init__(self):
        settings = kind_settings(self.kind)
        given = {
            f.name
            for f in dataclasses.fields(self)
            if f.name != "kind" and getattr(self, f.name) is not None
        }
        unknown = sorted(given - set(settings))
        if unknown:
            raise ValueError(
                f"unknown {self.kind} setting(s) {unknown}; choose from {sorted(settings)}"
            )
        for name, default in settings.items():
            if getattr(self, name) is None and default is not None:
                object.__setattr__(self, name, default)
        for name in _POSITIVE:
            value = getattr(self, name)
            if value is None:
                continue
            whole = isinstance(value, Integral) or (
                isinstance(value, Real) and float(value).is_integer()
            )
            if isinstance(value, bool) or not whole or value < 1:
                raise ValueError(f"{name}={value!r} must be a whole number of at least 1")
            # A JSON file may say 2.0; the programs count with it (range(rounds)).
            object.__setattr__(self, name, int(value))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProgramSpec:
        """Rebuild a spec from :meth:`to_dict` output (or a hand-written dict).

        Raises:
            ValueError: no ``kind``, an unknown kind, or settings the kind does not take.
        """
        if not isinstance(data, Mapping) or "kind" not in data:
            raise ValueError(f"a program spec needs a 'kind'; got {data!r}")
        settings = kind_settings(data["kind"])
        unknown = sorted(set(data) - set(settings) - {"kind"})
        if unknown:
            raise ValueError(
                f"unknown {data['kind']} setting(s) {unknown}; choose from {sorted(settings)}"
            )
        return cls(**dict(data))

    def to_dict(self) -> dict[str, Any]:
        """The kind and the settings it takes (None settings left out)."""
        out: dict[str, Any] = {"kind": self.kind}
        for name in kind_settings(self.kind):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    def takes(self, name: str) -> bool:
        """Whether this kind of program has the setting ``name``."""
        return name in kind_settings(self.kind)

    def replace(self, **changes: Any) -> ProgramSpec:
        """A copy with ``changes`` applied (validated like a new spec)."""
        return dataclasses.replace(self, **changes)

    @property
    def query_prompt(self) -> str:
        """A multi-step program's query prompt: ``titles``, ``planning`` or ``vanilla``."""
        return "titles" if self.titles else "planning" if self.planning else "vanilla"

    def describe(self) -> str:
        """A short label, e.g. ``multihop planning r3 k2 n4`` (``q8``: question_docs, ``p6``:
        phrase_docs, ``lm2``: the LM writes from round 2, ``no-lm``: it never writes), or
        ``agent s10 a8 t8000 n10`` (steps, articles, tokens, results per search)."""
        if self.kind == "multihop":
            label = f"multihop {self.query_prompt} r{self.rounds} k{self.k} n{self.n_docs}"
            label += f" q{self.question_docs}" if self.question_docs else ""
            label += f" p{self.phrase_docs}" if self.phrase_docs else ""
            if self.lm_from_round and self.lm_from_round > self.rounds:
                return label + " no-lm"
            return label + (f" lm{self.lm_from_round}" if self.lm_from_round else "")
        if self.kind == "bm25":
            return f"bm25 n{self.n_docs}"
        if self.kind == "phrases":
            return f"phrases n{self.n_docs} k{self.k}"
        if self.kind == "agent":
            return (
                f"agent s{self.max_steps} a{self.max_articles} t{self.max_agent_tokens} "
                f"n{self.n_docs}"
            )
        return self.kind
