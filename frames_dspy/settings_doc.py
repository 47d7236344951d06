"""``python -m frames_dspy.settings_doc``: :mod:`frames_dspy.commands.settings_doc` under its
documented name."""

from frames_dspy.commands import run

if __name__ == "__main__":
    run("settings-doc")
