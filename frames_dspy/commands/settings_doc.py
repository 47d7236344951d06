"""``docs/settings.md``: every option of the command lines, as the settings declare them.

Generated from the declarations (:func:`frames_dspy.base.settings.setting`, one field of a
command's settings class each: :class:`~frames_dspy.run.eval_config.EvalConfig`,
:class:`optimize.config.CompileConfig`, :class:`~frames_dspy.results.comparison.CompareConfig`),
so the page cannot drift from the code: ``python -m frames_dspy.settings_doc >
docs/settings.md`` rewrites it, and a test checks the committed page.
"""

from __future__ import annotations

from collections.abc import Sequence

from frames_dspy.base.settings import settings_markdown
from frames_dspy.results.comparison import CompareConfig
from frames_dspy.run.eval_config import EvalConfig
from optimize.config import CompileConfig

#: Its documented name (the page takes no arguments: no help or error shows it).
PROG = "python -m frames_dspy.settings_doc"

__all__ = ["settings_doc", "main"]


def settings_doc() -> str:
    """The page: one table per command line, one row per setting, in declaration order."""
    parts = [
        "# Settings\n",
        "Generated from the declarations (`frames_dspy.base.settings`): do not edit by hand; run "
        "`python -m frames_dspy.settings_doc > docs/settings.md`. Each row is one setting, "
        "declared once with its type, default and help; `config.json` records every one of "
        "them.\n",
        "## python -m frames_dspy.evaluate\n",
        settings_markdown(EvalConfig, "evaluate"),
        "## python -m optimize.compile\n",
        settings_markdown(CompileConfig, "compile"),
        "## python -m frames_dspy.compare\n",
        "`python -m frames_dspy.report html RUN RUN_B` takes the same options but `--seed`.\n",
        settings_markdown(CompareConfig, "compare"),
    ]
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None, *, prog: str = PROG) -> int:
    """Print the page (arguments are ignored)."""
    print(settings_doc(), end="")
    return 0
