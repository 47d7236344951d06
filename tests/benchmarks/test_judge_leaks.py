"""No word of a held-out labelled item in the judge's code, comments or tests."""

from __future__ import annotations

import pytest

from benchmarks import judge_leaks
from frames_dspy.judge.labels import LabelledItem


def _item(case: int, qid: int, gold: str, response: str) -> LabelledItem:
    return LabelledItem("Which one?", gold, response, True, "exact", qid, case)


def test_a_rare_word_of_a_held_out_item_in_a_scanned_file_is_found(tmp_path):
    # Two questions: one lands in each half. The held-out one's rare word is a leak where it
    # appears; a common word and a dev word are not.
    items = [_item(1, 1, "Quixbar Tomlin", "Quixbar"), _item(2, 2, "Zebulon Marr", "Zebulon")]
    dev_words = judge_leaks.words(" ".join(i.gold for i in judge_leaks.split_by_question(items)[0]))
    suspects = judge_leaks.held_out_only(items, common={"which", "one"})
    assert suspects and not suspects & dev_words and "which" not in suspects
    leaked = sorted(suspects)[0]
    (tmp_path / "tests" / "judge").mkdir(parents=True)
    (tmp_path / "tests" / "judge" / "test_rules.py").write_text(
        f"x = 1\ny = '{leaked.title()} here'\n"
    )
    assert judge_leaks.find_leaks(suspects, root=tmp_path) == [
        {"file": "tests/judge/test_rules.py", "line": 2, "words": [leaked]}
    ]


def test_a_copied_run_of_words_is_found(tmp_path):
    items = [
        _item(1, 1, "the tall lighthouse stood on the northern cape", "x"),
        _item(2, 2, "a quiet harbour town", "y"),
    ]
    runs = judge_leaks.held_out_shingles(items)
    if not runs:  # the long gold went to the dev half: swap the texts
        items = [_item(1, 1, "a quiet harbour town", "x"), _item(2, 2, items[0].gold, "y")]
        runs = judge_leaks.held_out_shingles(items)
    assert runs
    (tmp_path / "README.md").write_text('"The tall lighthouse stood on the "\n"northern cape."\n')
    found = judge_leaks.find_leaks(set(), runs, root=tmp_path)
    assert found and found[0]["line"] == 0


@pytest.mark.real
def test_no_held_out_item_leaks_into_the_judge(judge_labels, local_data):
    # Common words are those of the local copy's distractor summaries and questions.
    items = judge_leaks.load_labels(judge_labels)
    labelled = {i.id for i in items if i.id is not None}
    common = judge_leaks.common_words(local_data.local, 30, labelled)
    suspects = judge_leaks.held_out_only(items, common)
    assert judge_leaks.find_leaks(suspects, judge_leaks.held_out_shingles(items)) == []
