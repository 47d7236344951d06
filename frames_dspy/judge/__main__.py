"""``python -m frames_dspy.judge``: :mod:`frames_dspy.commands.judge` under its documented
name."""

from frames_dspy.commands import run

if __name__ == "__main__":
    run("judge")
