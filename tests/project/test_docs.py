"""The README stays a short guide and the generated docs pages stay generated.

``mkdocs build --strict`` (in ``.ci/run``) checks the site's links and pages; these check
what it cannot: the README's length and commands, and that the committed generated pages are
what their generators print today.
"""

from __future__ import annotations

from pathlib import Path

from frames_dspy.judge.rules import PIPELINE
from frames_dspy.judge.rules_doc import rules_markdown

REPO = Path(__file__).resolve().parents[2]

#: The README's three commands, character for character (.ci/run runs the first and last).
SETUP = 'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[local,dev]"'
MAIN = "python -m frames_dspy.evaluate --limit 10"
TEST = "pytest"


def test_docs_autorater_rules_md_is_generated_from_the_pipeline():
    written = (REPO / "docs" / "autorater-rules.md").read_text(encoding="utf-8")
    assert written == rules_markdown(), (
        "run: python -m frames_dspy.judge.rules_doc > docs/autorater-rules.md"
    )


def test_the_rules_page_lists_every_step_in_order():
    page = rules_markdown()
    rows = [line for line in page.splitlines() if line.startswith("| ") and "` |" in line]
    steps = [row.split("|")[2].strip(" `") for row in rows[: len(PIPELINE)]]
    assert steps == [rule.name for rule in PIPELINE]
    assert all(rule.decides in page for rule in PIPELINE)


def test_readme_is_a_short_guide_with_its_three_commands():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    blocks = text.split("```bash\n")[1:]
    commands = [block.split("```")[0].strip() for block in blocks]
    assert SETUP in commands and MAIN in commands and TEST in commands


def test_every_docs_page_the_readme_links_to_exists():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    for target in {part.split(")")[0].split("#")[0] for part in text.split("](")[1:]}:
        if target.startswith(("http://", "https://")) or not target:
            continue
        assert (REPO / target).exists(), target


def test_the_readme_layout_names_every_package_and_test_folder():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    layout = text.split("## Layout\n", 1)[1].split("\n## ", 1)[0]
    packages = sorted(
        d.name
        for d in (REPO / "frames_dspy").iterdir()
        if (d / "__init__.py").exists() and d.name != "__pycache__"
    )
    assert packages, "no packages found under frames_dspy/"
    missing = [name for name in packages if f"{name}/" not in layout]
    assert not missing, f"README's layout leaves out frames_dspy/{missing}"
    for top in ("optimize/", "benchmarks/", "experiments/", "tests/"):
        assert top in layout
    tests = sorted(d.name for d in (REPO / "tests").iterdir() if (d / "__init__.py").exists())
    assert all(f"{name}/" in layout or name in packages for name in tests), tests
