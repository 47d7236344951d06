"""``python -m frames_dspy.data``: :mod:`frames_dspy.commands.data` under its documented
name."""

from frames_dspy.commands import run

if __name__ == "__main__":
    run("data")
