"""``python -m frames_dspy.compare``: :mod:`frames_dspy.commands.compare` under its documented
name."""

from frames_dspy.commands import run

if __name__ == "__main__":
    run("compare")
