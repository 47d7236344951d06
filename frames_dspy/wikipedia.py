"""``python -m frames_dspy.wikipedia``: :mod:`frames_dspy.commands.wikipedia` under its documented
name."""

from frames_dspy.commands import run

if __name__ == "__main__":
    run("wikipedia")
