"""``python -m frames_dspy.evaluate``: :mod:`frames_dspy.commands.evaluate` under its documented
name."""

from frames_dspy.commands import run

if __name__ == "__main__":
    run("evaluate")
