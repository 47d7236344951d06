"""``docs/autorater-rules.md``: the autorater's rules as the code declares them.

Generated from :data:`~frames_dspy.judge.rules.PIPELINE` (each step's one-line ``decides``
and the verdicts it gives, declared in its own module of :mod:`frames_dspy.judge.steps`) and
:data:`~frames_dspy.judge.rules.RULES` (what each verdict means), so the page cannot drift
from the code: ``python -m frames_dspy.judge.rules_doc > docs/autorater-rules.md`` rewrites
it, and a test checks the committed page.
"""

from __future__ import annotations

from frames_dspy.judge.rules import PIPELINE, RULES

__all__ = ["rules_markdown"]

_INTRO = (
    "Generated from the code (the steps of `frames_dspy/judge/steps/`, in the order "
    "`frames_dspy/judge/rules.py` tries them): do not edit by hand; run "
    "`python -m frames_dspy.judge.rules_doc > docs/autorater-rules.md`. How the rules are "
    "used, and how well they agree with hand labels, is on the [autorater](autorater.md) page."
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def rules_markdown() -> str:
    """The page: the pipeline's steps in the order they are tried, then every verdict."""
    lines = [
        "# Autorater rules",
        "",
        _INTRO,
        "",
        "## The pipeline",
        "",
        "An empty response is FALSE (`empty`) before any step runs. Then each step is tried "
        "in this order and the first verdict wins; a step whose guard does not hold (the gold "
        "is not of its kind) is skipped. When no step decides, the LM judge does.",
        "",
        "| # | step | decides | verdicts it gives |",
        "|---:|---|---|---|",
    ]
    for number, rule in enumerate(PIPELINE, start=1):
        verdicts = ", ".join(f"`{name}`" for name in rule.verdicts)
        lines.append(f"| {number} | `{rule.name}` | {_cell(rule.decides)} | {verdicts} |")
    lines += [
        "",
        "## The verdicts",
        "",
        "A record's `judge_method` is one of these names when a rule decided; the last column "
        "names the steps (files of `frames_dspy/judge/steps/`) that give it.",
        "",
        "| verdict | gives | when | given by the steps |",
        "|---|---|---|---|",
    ]
    for name, text in RULES.items():
        outcome, _, when = text.partition(": ")
        steps = ", ".join(f"`{rule.name}`" for rule in PIPELINE if name in rule.verdicts)
        lines.append(f"| `{name}` | {outcome} | {_cell(when)} | {steps or 'before any step'} |")
    return "\n".join(lines) + "\n"
