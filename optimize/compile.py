"""``python -m optimize.compile``: :mod:`frames_dspy.commands.compile` under its documented
name."""

from frames_dspy.commands import run

if __name__ == "__main__":
    run("compile")
