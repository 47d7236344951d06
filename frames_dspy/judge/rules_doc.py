"""``python -m frames_dspy.judge.rules_doc``: :mod:`frames_dspy.commands.rules_doc` under its
documented name."""

from frames_dspy.commands import run

if __name__ == "__main__":
    run("rules-doc")
