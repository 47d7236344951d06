"""What the command lines share: the model and data option groups, and loading the store.

``python -m frames_dspy.evaluate`` and ``python -m optimize.compile`` take the same model and
data options and resolve the corpus the same way; both build them from here so a flag means
one thing everywhere.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from frames_dspy.corpus import ArticleStore, default_aliases, load_corpus
from frames_dspy.paths import data_file, default_dataset

__all__ = [
    "ModelDataSettings",
    "positive_int",
    "choice_list",
    "add_model_arguments",
    "add_data_arguments",
    "load_store",
]


@dataclass
class ModelDataSettings:
    """The model and data settings every entry point shares (the options added by
    :func:`add_model_arguments` and :func:`add_data_arguments`)."""

    model: str = "local"
    judge_model: str | None = None
    api_base: str | None = None
    judge_api_base: str | None = None
    judge_min_overlap: float | None = None
    temperature: float = 0.0
    # Answers and query lists are short; a small model that loops stops here instead of
    # spending minutes (and a parse-failure retry) on 512 tokens of repetition.
    max_tokens: int = 256
    dataset: str = field(default_factory=default_dataset)
    revision: str | None = None
    corpus: str | None = None
    aliases: str | None = None
    distractors: str | None = None
    retriever: str = "bm25s"

    def model_data_settings(self) -> dict[str, Any]:
        """These shared settings as keyword arguments (to hand them to another config)."""
        return {f.name: getattr(self, f.name) for f in fields(ModelDataSettings)}


def positive_int(name: str):
    """An argparse type for a whole number >= 1 whose error names the flag."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} {text!r} is not a whole number") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{name} {value} must be at least 1")
        return value

    return parse


def choice_list(choices: Sequence[str], what: str):
    """An argparse type for a comma-separated list drawn from ``choices`` (a tuple, in order)."""

    def parse(text: str) -> tuple[str, ...]:
        names = tuple(name.strip() for name in text.split(",") if name.strip())
        unknown = [name for name in names if name not in choices]
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {unknown or [text]}; choose from {', '.join(choices)}"
            )
        return names

    return parse


def add_model_arguments(parser: argparse.ArgumentParser, defaults: Any) -> None:
    """``--model``, ``--api-base``, the judge's options, ``--temperature``, ``--max-tokens``."""
    models = parser.add_argument_group("models")
    models.add_argument(
        "--model",
        default=defaults.model,
        help="program LM: 'local' (embedded, offline), 'local-1.5b', 'local:/path.gguf', or a "
        "LiteLLM model string such as openai/gpt-4o-mini (default %(default)s)",
    )
    models.add_argument(
        "--api-base",
        default=None,
        help="OpenAI-compatible server for --model (vLLM, Ollama, llama.cpp)",
    )
    models.add_argument(
        "--judge-model", default=None, help="autorater LM (default: the same as --model)"
    )
    models.add_argument("--judge-api-base", default=None, help="server for --judge-model")
    models.add_argument(
        "--judge-min-overlap",
        type=float,
        default=None,
        help="keep a judge's TRUE only if the answer holds this share of the gold answer's "
        "content words (default 0.5 for the embedded judge, which says TRUE to almost "
        "anything; 0 for other judges)",
    )
    models.add_argument("--temperature", type=float, default=defaults.temperature)
    models.add_argument(
        "--max-tokens",
        type=positive_int("--max-tokens"),
        default=defaults.max_tokens,
        help="output tokens per program LM call (default %(default)s)",
    )


def add_data_arguments(parser: argparse.ArgumentParser, defaults: Any) -> None:
    """``--dataset``, ``--revision``, ``--corpus``, ``--aliases``, ``--distractors``,
    ``--retriever``."""
    data = parser.add_argument_group("data")
    data.add_argument(
        "--dataset",
        default=defaults.dataset,
        help="hub id or local .tsv/.csv (default: %(default)s)",
    )
    data.add_argument("--revision", default=None, help="hub revision to pin")
    data.add_argument(
        "--corpus",
        default=None,
        help="articles JSONL(.gz) (default: frames_wiki/pages.jsonl.gz under $FRAMES_DATA_DIR)",
    )
    data.add_argument(
        "--aliases",
        default=None,
        help="link -> page_id TSV (default: frames_link_to_page.tsv beside the corpus)",
    )
    data.add_argument(
        "--distractors",
        default=None,
        help="distractor summaries JSON added to the index, or 'none' (default: the Vital "
        "Articles summaries under $FRAMES_DATA_DIR, with the default corpus only)",
    )
    data.add_argument(
        "--retriever",
        choices=["bm25s", "rank-bm25"],
        default=defaults.retriever,
        help="BM25 backend (default %(default)s)",
    )


def load_store(
    config: Any, *, needed_for: str = "the retrieval and oracle conditions"
) -> ArticleStore:
    """The article store a run config names (its ``corpus``, ``aliases``, ``distractors``).

    Fills those fields in on ``config`` with what was used, so the run records it. Only the
    default corpus (under ``FRAMES_DATA_DIR``) gets the default distractors; a user's own
    corpus is left as it is unless ``distractors`` names a file.

    Raises:
        ValueError: no corpus given and none under ``FRAMES_DATA_DIR``.
    """
    corpus = config.corpus or data_file("corpus")
    if corpus is None:
        raise ValueError(
            f"{needed_for} need a corpus: pass --corpus PATH (JSONL of title/text articles) "
            "or set FRAMES_DATA_DIR"
        )
    if config.distractors is None and config.corpus is None and data_file("distractors"):
        config.distractors = str(data_file("distractors"))
    config.corpus = str(corpus)
    if config.aliases is None and (aliases := default_aliases(corpus)):
        config.aliases = str(aliases)
    distractors = None if config.distractors in (None, "none") else config.distractors
    return load_corpus(corpus, aliases=config.aliases, distractors=distractors)
