"""The FRAMES paper's setups as DSPy modules, and context packing under a token budget.

Every program returns a ``dspy.Prediction`` with the same fields, so the evaluation and the
optimizers treat them alike:

- ``answer``: the final answer text;
- ``context_ids``: for each round, the ids of the articles in context after it (one round for
  the single-shot setups, none for ``Naive``);
- ``queries``: for each round, the search queries sent;
- ``lm_calls``, ``prompt_tokens``, ``completion_tokens``: this prediction's LM use (tokens are
  what the LM reported; answers served from DSPy's cache cost none);
- ``packing``: how the articles were fitted into the answer prompt (tokens, how much was cut);
- ``query_stats``: generated, repeated and dropped queries, and query-generation errors.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError
from dspy.utils.usage_tracker import track_usage

from frames_dspy.corpus import Article, ArticleStore
from frames_dspy.signatures import (
    AnswerFromKnowledge,
    AnswerWithContext,
    GenerateQueries,
    PlanQueries,
)

logger = logging.getLogger(__name__)

__all__ = [
    "CHARS_PER_TOKEN",
    "CONDITIONS",
    "PackedContext",
    "Naive",
    "RetrieveThenAnswer",
    "Oracle",
    "MultiHop",
    "pack_articles",
    "clean_queries",
    "build_program",
    "program_spec",
    "save_program",
    "load_program",
    "describe",
]

# English Wikipedia text runs close to 4 characters per token for the Qwen and GPT tokenizers;
# budgets are set in tokens and converted with this ratio, so no tokenizer pass is needed.
CHARS_PER_TOKEN = 4.0

#: Condition name -> program spec; the paper's six setups.
CONDITIONS: dict[str, dict[str, Any]] = {
    "naive": {"kind": "naive"},
    "bm25-2": {"kind": "bm25", "n_docs": 2},
    "bm25-4": {"kind": "bm25", "n_docs": 4},
    "oracle": {"kind": "oracle"},
    "multistep-vanilla": {"kind": "multihop", "planning": False},
    "multistep-planning": {"kind": "multihop", "planning": True},
}


@dataclass
class PackedContext:
    """Articles rendered into one prompt field, with a record of what was cut."""

    text: str
    article_ids: list[str]
    budget_tokens: int
    used_tokens: int
    kept_fraction: dict[str, float] = field(default_factory=dict)

    @property
    def n_truncated(self) -> int:
        return sum(1 for f in self.kept_fraction.values() if f < 1.0)

    def summary(self) -> dict[str, Any]:
        return {
            "budget_tokens": self.budget_tokens,
            "used_tokens": self.used_tokens,
            "articles": len(self.article_ids),
            "truncated": self.n_truncated,
            "kept_fraction": {k: round(v, 4) for k, v in self.kept_fraction.items()},
        }


def _fair_shares(lengths: Sequence[int], budget: int) -> list[int]:
    # Water-filling: short articles keep all their text and leave the rest of their share to
    # the longer ones, which split what remains equally.
    shares = [0] * len(lengths)
    remaining, pending = budget, sorted(range(len(lengths)), key=lambda i: lengths[i])
    while pending:
        share = remaining // len(pending)
        i = pending[0]
        if lengths[i] <= share:
            shares[i] = lengths[i]
            remaining -= lengths[i]
            pending.pop(0)
        else:
            for j in pending:
                shares[j] = share
            break
    return shares


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    if space > limit * 0.8:
        cut = cut[:space]
    return cut.rstrip() + " …"


def pack_articles(articles: Sequence[Article], budget_tokens: int) -> PackedContext:
    """Render articles in order, each cut to a fair share of the budget; none is dropped.

    Args:
        articles: In retrieval order; that order is kept in the prompt.
        budget_tokens: Tokens for the whole field (estimated at ``CHARS_PER_TOKEN``).

    Returns:
        The text and, per article, the fraction of its text kept.
    """
    if budget_tokens <= 0:
        raise ValueError(f"budget_tokens={budget_tokens} must be positive")
    headers = [f"[{i}] {a.title}\n" for i, a in enumerate(articles, start=1)]
    # Reserve the headers, the blank lines between articles and a " …" cut mark per article.
    overhead = sum(len(h) for h in headers) + 2 * max(len(articles) - 1, 0) + 2 * len(articles)
    budget_chars = int(budget_tokens * CHARS_PER_TOKEN) - overhead
    shares = _fair_shares([len(a.text) for a in articles], max(budget_chars, 0))
    parts, kept = [], {}
    for header, article, share in zip(headers, articles, shares, strict=True):
        body = _cut(article.text, share) if share > 0 else "…"
        parts.append(header + body)
        kept[article.id] = min(share, len(article.text)) / max(len(article.text), 1)
    text = "\n\n".join(parts)
    return PackedContext(
        text=text,
        article_ids=[a.id for a in articles],
        budget_tokens=budget_tokens,
        used_tokens=round(len(text) / CHARS_PER_TOKEN),
        kept_fraction=kept,
    )


_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)]|query\s*\d*:)\s*", re.IGNORECASE)


def _clean_one(query: object) -> str:
    text = _BULLET.sub("", str(query)).strip().strip("\"'`").strip()
    return " ".join(text.split())


def clean_queries(
    generated: Sequence[object] | str | None,
    *,
    limit: int,
    taken: Sequence[str] = (),
    past: Sequence[str] = (),
    drop_repeats: bool,
) -> tuple[list[str], dict[str, int]]:
    """Tidy LM-written queries: strip list markers, drop empty and duplicate ones, keep ``limit``.

    Args:
        generated: What the LM wrote (a list, or a newline-separated string).
        limit: How many queries to keep at most.
        taken: Queries already chosen for this round (e.g. the question); never duplicated.
        past: Queries of earlier rounds.
        drop_repeats: Drop queries that repeat an earlier round's (the planning prompt's rule);
            when False they are kept and only counted.

    Returns:
        The kept queries and counts: ``generated``, ``repeated`` (matching an earlier round),
        ``dropped_repeats`` and ``dropped_duplicates`` (empty or repeated within the round).
    """
    if generated is None:
        items: list[object] = []
    elif isinstance(generated, str):
        items = generated.splitlines()
    else:
        items = list(generated)
    seen = {q.casefold() for q in taken}
    earlier = {q.casefold() for q in past}
    kept: list[str] = []
    stats = {"generated": 0, "repeated": 0, "dropped_repeats": 0, "dropped_duplicates": 0}
    for item in items:
        query = _clean_one(item)
        stats["generated"] += 1
        key = query.casefold()
        if not query or key in seen:
            stats["dropped_duplicates"] += 1
            continue
        if key in earlier:
            stats["repeated"] += 1
            if drop_repeats:
                stats["dropped_repeats"] += 1
                continue
        if len(kept) < limit:
            kept.append(query)
            seen.add(key)
    return kept, stats


class _FramesProgram(dspy.Module):
    """Shared parts: the answer step, usage accounting, and the prediction layout."""

    #: Example fields passed to ``forward``.
    input_fields: tuple[str, ...] = ("question",)

    def __init__(self, *, context_tokens: int, cot: bool = False):
        super().__init__()
        if context_tokens <= 0:
            raise ValueError(f"context_tokens={context_tokens} must be positive")
        self.context_tokens = context_tokens
        self.cot = cot
        make = dspy.ChainOfThought if cot else dspy.Predict
        self.answer = make(AnswerWithContext)

    def _answer(self, question: str, articles: Sequence[Article]) -> tuple[str, PackedContext]:
        packed = pack_articles(articles, self.context_tokens) if articles else None
        context = packed.text if packed else "(no articles were found)"
        result = self.answer(question=question, context=context)
        return str(result.answer).strip(), packed

    def _run(self, body: Callable[[], dict[str, Any]]) -> dspy.Prediction:
        with track_usage() as tracker:
            fields = body()
        prompt_tokens = completion_tokens = 0
        for usage in tracker.get_total_tokens().values():
            prompt_tokens += int(usage.get("prompt_tokens") or 0)
            completion_tokens += int(usage.get("completion_tokens") or 0)
        packed: PackedContext | None = fields.pop("packed", None)
        return dspy.Prediction(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            packing=packed.summary() if packed else None,
            **fields,
        )


class Naive(_FramesProgram):
    """The paper's naive prompt: the question alone, no retrieval."""

    def __init__(self, *, cot: bool = False):
        dspy.Module.__init__(self)
        self.cot = cot
        self.answer = (dspy.ChainOfThought if cot else dspy.Predict)(AnswerFromKnowledge)

    def forward(self, question: str) -> dspy.Prediction:
        def body():
            answer = self.answer(question=question).answer
            return {"answer": str(answer).strip(), "context_ids": [], "queries": [], "lm_calls": 1}

        return self._run(body)


class RetrieveThenAnswer(_FramesProgram):
    """BM25-R: the top ``n_docs`` articles for the question, then one answer call."""

    def __init__(self, retriever, *, n_docs: int, context_tokens: int, cot: bool = False):
        super().__init__(context_tokens=context_tokens, cot=cot)
        if n_docs < 1:
            raise ValueError(f"n_docs={n_docs} must be at least 1")
        self.retriever = retriever
        self.n_docs = n_docs

    def forward(self, question: str) -> dspy.Prediction:
        def body():
            hits = self.retriever.search(question, self.n_docs)
            articles = [self.retriever.store[h.article_id] for h in hits]
            answer, packed = self._answer(question, articles)
            ids = [a.id for a in articles]
            return {
                "answer": answer,
                "context_ids": [ids],
                "queries": [[question]],
                "lm_calls": 1,
                "packed": packed,
            }

        return self._run(body)


class Oracle(_FramesProgram):
    """All gold articles the corpus has, then one answer call (the paper's upper bound)."""

    input_fields = ("question", "gold_urls")

    def __init__(self, store: ArticleStore, *, context_tokens: int, cot: bool = False):
        super().__init__(context_tokens=context_tokens, cot=cot)
        self.store = store

    def forward(self, question: str, gold_urls: Sequence[str] | None = None) -> dspy.Prediction:
        if gold_urls is None:
            raise ValueError("Oracle needs the example's gold_urls; call it with gold_urls=[...]")

        def body():
            articles = self.store.resolve_many(gold_urls)
            answer, packed = self._answer(question, articles)
            return {
                "answer": answer,
                "context_ids": [[a.id for a in articles]],
                "queries": [],
                "lm_calls": 1,
                "packed": packed,
            }

        return self._run(body)


class MultiHop(_FramesProgram):
    """The paper's multi-step retrieval (its Algorithm 1), vanilla or with search planning.

    Each of ``rounds`` rounds writes ``k`` queries, retrieves the top ``n_docs`` articles per
    query that are not yet in context, and appends them; one answer call follows the last round.

    Args:
        retriever: Has ``search_many(queries, k, exclude=...)`` and a ``store``.
        rounds: Retrieval rounds (the paper: up to 5).
        k: Queries per round (the paper: 5).
        n_docs: Articles retrieved per query (the paper: 10).
        planning: Use the search-planning prompt (examples, no repeats, step by step) and drop
            queries that repeat an earlier round's.
        include_question: Make the question itself one of each round's ``k`` queries. Small
            models often echo the question or answer it instead of writing queries; the
            question keeps retrieval useful whatever they write.
        context_tokens: Budget of the answer prompt's article field.
        found_tokens: Budget of the compact view (titles and leads) that query writing sees.
        lead_chars: Characters of each article's opening shown in that view.
        cot: Answer with chain of thought.
    """

    def __init__(
        self,
        retriever,
        *,
        rounds: int = 5,
        k: int = 5,
        n_docs: int = 10,
        planning: bool = True,
        include_question: bool = True,
        context_tokens: int,
        found_tokens: int = 1000,
        lead_chars: int = 120,
        cot: bool = False,
    ):
        super().__init__(context_tokens=context_tokens, cot=cot)
        for name, value in (("rounds", rounds), ("k", k), ("n_docs", n_docs)):
            if value < 1:
                raise ValueError(f"{name}={value} must be at least 1")
        self.retriever = retriever
        self.rounds, self.k, self.n_docs = rounds, k, n_docs
        self.planning = planning
        self.include_question = include_question
        self.found_tokens = found_tokens
        self.lead_chars = lead_chars
        self.generate = dspy.Predict(PlanQueries if planning else GenerateQueries)

    def _found_view(self, articles: Sequence[Article]) -> str:
        # Append-only: a later round's view extends the earlier one, so a prefix cache helps.
        lines, used = [], 0
        budget = self.found_tokens * CHARS_PER_TOKEN
        for i, article in enumerate(articles, start=1):
            lead = " ".join(article.text[: self.lead_chars * 2].split())[: self.lead_chars]
            line = f"[{i}] {article.title}: {lead}…" if used < budget else f"[{i}] {article.title}"
            used += len(line) + 1
            lines.append(line)
        return "\n".join(lines) if lines else "(nothing yet)"

    def forward(self, question: str) -> dspy.Prediction:
        def body():
            store = self.retriever.store
            context: list[Article] = []
            in_context: set[str] = set()
            per_round_ids: list[list[str]] = []
            per_round_queries: list[list[str]] = []
            past: list[str] = []
            stats = {
                "generated": 0,
                "repeated": 0,
                "dropped_repeats": 0,
                "dropped_duplicates": 0,
                "errors": 0,
            }
            calls = 0
            for _ in range(self.rounds):
                queries = [question] if self.include_question else []
                wanted = self.k - len(queries)
                if wanted > 0:
                    calls += 1
                    try:
                        out = self.generate(
                            question=question,
                            found=self._found_view(context),
                            past_queries=past,
                            n_queries=wanted,
                        )
                        written = out.queries
                    except AdapterParseError as err:
                        logger.warning("query generation could not be parsed: %s", err)
                        stats["errors"] += 1
                        written = []
                    kept, counts = clean_queries(
                        written,
                        limit=wanted,
                        taken=queries,
                        past=past,
                        drop_repeats=self.planning,
                    )
                    for key, value in counts.items():
                        stats[key] += value
                    queries.extend(kept)
                    past.extend(kept)
                if not queries:
                    queries = [question]
                results = self.retriever.search_many(queries, self.n_docs, exclude=in_context)
                for hits in results:
                    for hit in hits:
                        if hit.article_id not in in_context:
                            in_context.add(hit.article_id)
                            context.append(store[hit.article_id])
                per_round_ids.append([a.id for a in context])
                per_round_queries.append(queries)
            answer, packed = self._answer(question, context)
            return {
                "answer": answer,
                "context_ids": per_round_ids,
                "queries": per_round_queries,
                "lm_calls": calls + 1,
                "query_stats": stats,
                "packed": packed,
            }

        return self._run(body)


# --- building, saving and loading programs by spec ------------------------------------------


def program_spec(program: dspy.Module) -> dict[str, Any]:
    """The constructor settings that rebuild ``program``'s shape (not its prompts)."""
    if isinstance(program, MultiHop):
        return {
            "kind": "multihop",
            "rounds": program.rounds,
            "k": program.k,
            "n_docs": program.n_docs,
            "planning": program.planning,
            "include_question": program.include_question,
            "cot": program.cot,
        }
    if isinstance(program, RetrieveThenAnswer):
        return {"kind": "bm25", "n_docs": program.n_docs, "cot": program.cot}
    if isinstance(program, Oracle):
        return {"kind": "oracle", "cot": program.cot}
    if isinstance(program, Naive):
        return {"kind": "naive", "cot": program.cot}
    raise TypeError(f"not a frames_dspy program: {type(program).__name__}")


def build_program(
    spec: dict[str, Any],
    *,
    retriever=None,
    store: ArticleStore | None = None,
    context_tokens: int = 2000,
) -> dspy.Module:
    """Build a program from a spec (a ``CONDITIONS`` value, possibly with overrides).

    Raises:
        ValueError: an unknown kind, or a retriever/store missing for a kind that needs it.
    """
    spec = dict(spec)
    kind = spec.pop("kind", None)
    cot = bool(spec.pop("cot", False))
    if kind == "naive":
        return Naive(cot=cot)
    if kind == "oracle":
        if store is None:
            raise ValueError("the oracle program needs an article store")
        return Oracle(store, context_tokens=context_tokens, cot=cot)
    if kind in ("bm25", "multihop") and retriever is None:
        raise ValueError(f"the {kind} program needs a retriever")
    if kind == "bm25":
        return RetrieveThenAnswer(
            retriever, n_docs=int(spec.get("n_docs", 4)), context_tokens=context_tokens, cot=cot
        )
    if kind == "multihop":
        allowed = {
            "rounds",
            "k",
            "n_docs",
            "planning",
            "include_question",
            "found_tokens",
            "lead_chars",
        }
        unknown = set(spec) - allowed
        if unknown:
            raise ValueError(
                f"unknown multihop setting(s) {sorted(unknown)}; choose from {sorted(allowed)}"
            )
        return MultiHop(retriever, context_tokens=context_tokens, cot=cot, **spec)
    raise ValueError(f"unknown program kind {kind!r}; choose one of naive, bm25, oracle, multihop")


_SPEC_KEY = "frames_dspy_spec"


def save_program(program: dspy.Module, path: str, *, extra: dict[str, Any] | None = None) -> None:
    """Save prompts and demos (DSPy's JSON state) plus the spec that rebuilds the program.

    The file is self-contained: :func:`load_program` needs nothing else.
    """
    import json
    from pathlib import Path

    state = program.dump_state()
    state[_SPEC_KEY] = {**program_spec(program), **(extra or {})}
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(state, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    tmp.replace(target)


def load_program(
    path: str, *, retriever=None, store: ArticleStore | None = None, context_tokens: int = 2000
) -> tuple[dspy.Module, dict[str, Any]]:
    """Rebuild a program saved by :func:`save_program` and load its prompts and demos.

    Returns:
        The program and its saved spec.

    Raises:
        ValueError: the file is not JSON, has no spec, or its predictors do not match the
            program its spec describes.
    """
    import json
    from pathlib import Path

    try:
        state = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"cannot read program file {path}: {err}") from err
    spec = state.pop(_SPEC_KEY, None)
    if not isinstance(spec, dict):
        raise ValueError(
            f"{path} has no '{_SPEC_KEY}' entry: it was not written by frames_dspy "
            "(python -m optimize.compile writes program.json files that evaluate can load)"
        )
    shape = {k: v for k, v in spec.items() if k in _SHAPE_KEYS}
    program = build_program(shape, retriever=retriever, store=store, context_tokens=context_tokens)
    expected = {name for name, _ in program.named_predictors()}
    found = {k for k in state if k != "metadata"}
    if expected != found:
        raise ValueError(
            f"{path} holds predictors {sorted(found)} but a {spec.get('kind')} program has "
            f"{sorted(expected)}: the file belongs to a different program shape"
        )
    program.load_state(state)
    return program, spec


_SHAPE_KEYS = frozenset(
    {
        "kind",
        "rounds",
        "k",
        "n_docs",
        "planning",
        "include_question",
        "cot",
        "found_tokens",
        "lead_chars",
    }
)


def describe(spec: dict[str, Any]) -> str:
    """A short human label for a spec, e.g. ``multihop planning r3 k2 n4``."""
    kind = spec.get("kind")
    if kind == "multihop":
        style = "planning" if spec.get("planning") else "vanilla"
        return f"multihop {style} r{spec.get('rounds')} k{spec.get('k')} n{spec.get('n_docs')}"
    if kind == "bm25":
        return f"bm25 n{spec.get('n_docs')}"
    return str(kind)
