"""``python -m frames_dspy.judge.rules_doc``: ``docs/autorater-rules.md``, the autorater's rules
as the code declares them (:func:`frames_dspy.judge.rules_page.rules_markdown`).

``python -m frames_dspy.judge.rules_doc > docs/autorater-rules.md`` rewrites the page; a test
checks the committed one.
"""

from __future__ import annotations

from collections.abc import Sequence

from frames_dspy.judge.rules_page import rules_markdown

#: Its documented name (the page takes no arguments: no help or error shows it).
PROG = "python -m frames_dspy.judge.rules_doc"

__all__ = ["main"]


def main(argv: Sequence[str] | None = None, *, prog: str = PROG) -> int:
    """Print the page (arguments are ignored)."""
    print(rules_markdown(), end="")
    return 0
