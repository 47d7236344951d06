"""The FRAMES paper's setups as DSPy programs.

- :mod:`~frames_dspy.programs.spec`: :class:`ProgramSpec`, a program's shape as frozen data;
- :mod:`~frames_dspy.programs.packing`: articles fitted into the answer prompt's budget;
- :mod:`~frames_dspy.programs.modules`: one ``dspy.Module`` per single-shot kind, and
  ``build_program``;
- :mod:`~frames_dspy.programs.multihop`: ``MultiHop``, the paper's multi-step method;
- :mod:`~frames_dspy.programs.agent`: the agent (search, read, finish under limits);
- :mod:`~frames_dspy.programs.trajectory`: what the agent did, step by step, as typed data;
- :mod:`~frames_dspy.programs.queries`: written queries cleaned and counted (``QueryStats``),
  the question's named phrases;
- :mod:`~frames_dspy.programs.conditions`: the paper's six setups as named specs (and ``bm25-N``,
  ``agent``);
- :mod:`~frames_dspy.programs.io`: ``program.json`` save and load;
- :mod:`~frames_dspy.programs.sources`: what the LM adds (no-LM parts alone, bm25-N and
  phrases-N at a run's own article counts).
"""

from frames_dspy.programs.agent import SearchAgent
from frames_dspy.programs.conditions import (
    CONDITIONS,
    MORE_CONDITIONS,
    PAPER_ACCURACY,
    Condition,
    condition,
    condition_names,
)
from frames_dspy.programs.io import (
    check_program_file,
    load_program,
    read_program_file,
    save_program,
)
from frames_dspy.programs.modules import (
    PROGRAM_CLASSES,
    Naive,
    Oracle,
    PhraseQueries,
    RetrieveThenAnswer,
    build_program,
)
from frames_dspy.programs.multihop import MultiHop
from frames_dspy.programs.packing import CHARS_PER_TOKEN, PackedContext, pack_articles
from frames_dspy.programs.queries import QueryStats, capitalised_phrases, clean_queries
from frames_dspy.programs.sources import (
    NoLMReferences,
    lm_queries,
    lm_queries_per_round,
    no_lm_recall,
    no_lm_recalls,
    without_lm,
)
from frames_dspy.programs.spec import ProgramSpec
from frames_dspy.programs.trajectory import AgentCounts, AgentStep

__all__ = [
    "AgentCounts",
    "AgentStep",
    "CHARS_PER_TOKEN",
    "CONDITIONS",
    "MORE_CONDITIONS",
    "PAPER_ACCURACY",
    "PROGRAM_CLASSES",
    "Condition",
    "MultiHop",
    "Naive",
    "NoLMReferences",
    "Oracle",
    "PackedContext",
    "PhraseQueries",
    "ProgramSpec",
    "QueryStats",
    "RetrieveThenAnswer",
    "SearchAgent",
    "build_program",
    "capitalised_phrases",
    "condition",
    "condition_names",
    "check_program_file",
    "clean_queries",
    "load_program",
    "lm_queries",
    "lm_queries_per_round",
    "no_lm_recall",
    "no_lm_recalls",
    "pack_articles",
    "read_program_file",
    "save_program",
    "without_lm",
]
