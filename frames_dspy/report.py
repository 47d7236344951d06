"""``python -m frames_dspy.report``: :mod:`frames_dspy.commands.report` under its documented
name."""

from frames_dspy.commands import run

if __name__ == "__main__":
    run("report")
