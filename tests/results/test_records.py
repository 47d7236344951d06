"""frames_dspy.results.records: the typed prediction record, its versions, who may read it how."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from frames_dspy.programs.trajectory import AgentStep
from frames_dspy.results.records import (
    SCHEMA_VERSION,
    QuestionRecord,
    RecordError,
    folder_schema,
    read_records,
    record_fields,
)
from frames_dspy.results.run_folder import RunFolder, load_records

REPO = Path(__file__).resolve().parents[2]


def test_a_record_round_trips_through_its_json_line():
    record = QuestionRecord(
        "bm25-2", 7, answer="Paris", correct=True, judge_method="exact",
        context_ids=[["a", "b"]], recall=[0.5], queries=[["q"]], metered_tokens=40,
        prompt_tokens=30, completion_tokens=2, cost_usd=0.01,
    )  # fmt: skip
    line = record.to_json()
    assert list(json.loads(line)) == list(record_fields())  # every field, in order
    assert QuestionRecord.from_dict(json.loads(line)) == record


def test_derived_figures_have_one_definition():
    record = QuestionRecord("c", 1, correct=None, judge_method="judge_error", recall=[0.5, 1.0],
                            metered_tokens=90, prompt_tokens=0, completion_tokens=0,
                            judge_prompt_tokens=5, judge_completion_tokens=1)  # fmt: skip
    assert not record.is_correct and record.judge_failed and not record.failed
    assert (record.round1_recall, record.final_recall) == (0.5, 1.0)
    # Tokens are metered tokens; a cached call reports none.
    assert (record.tokens, record.reported_tokens, record.judge_tokens) == (90, 0, 6)
    nothing_found = QuestionRecord("naive", 2, recall=[])
    assert (nothing_found.final_recall, QuestionRecord("c", 3).final_recall) == (0.0, None)


def test_a_version_1_line_is_migrated(tmp_path):
    # An early record: no error_kind, answer_in_context, metered or judge counts, and a
    # count left null; the id written as text.
    old = {"condition": "naive", "id": "4", "answer": "x", "correct": False,
           "judge_method": "judge", "error": None, "recall": [], "lm_calls": None,
           "prompt_tokens": 10, "completion_tokens": 2, "seconds": 1.5, "gone": 1}  # fmt: skip
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"settings": {}}))  # no record_schema: 1
    (folder / "predictions.jsonl").write_text(json.dumps(old) + "\n")
    (record,) = load_records(folder)
    assert (record.id, record.lm_calls, record.metered_tokens, record.error_kind) == (4, 0, 0, None)
    assert record.answer_in_context is None and record.reported_tokens == 12


AGENT_STEPS = [
    AgentStep("search", "Bell birthplace", "ok", "Alexander Graham Bell; Telephone",
              ["bell", "phone"], 90),
    AgentStep("read", "Alexander Graham Bell", "ok", "Alexander Graham Bell: born in…",
              ["bell"], 120),
    AgentStep("lookup", "Edinburgh", "unknown_tool", "no such tool", [], 130),
    AgentStep("finish", tokens=140),
]  # fmt: skip


def agent_record(**extra) -> QuestionRecord:
    return QuestionRecord(
        "agent", 5, gold_ids=["bell", "leith"], trajectory=list(AGENT_STEPS),
        stop_reason="finish", near_repeat_rate=0.0, context_ids=[[], ["bell"], ["bell"], ["bell"]],
        recall=[0.0, 0.5, 0.5, 0.5], packing={"kept_fraction": {"bell": 0.6}}, **extra,
    )  # fmt: skip


def test_an_agent_record_round_trips_with_its_steps_typed():
    record = agent_record()
    again = QuestionRecord.from_dict(json.loads(record.to_json()))
    assert again == record and isinstance(again.trajectory[0], AgentStep)
    counts = again.agent_counts
    assert (counts.steps, counts.searches, counts.reads, counts.malformed) == (4, 1, 1, 1)
    assert again.searched_ids == ["bell", "phone"] and again.read_ids == ["bell"]
    assert again.used_ids == ["bell"]
    assert again.gold_share(again.searched_ids) == 0.5 == again.gold_share(again.read_ids)
    # A condition without a trajectory has none of these figures: None, never 0.
    plain = QuestionRecord("bm25-2", 5, gold_ids=["bell"])
    assert plain.agent_counts is plain.searched_ids is plain.used_ids is None
    assert plain.gold_share(plain.read_ids) is None


def test_a_version_2_line_reads_as_a_record_without_a_trajectory(tmp_path):
    # A record as version 2 wrote it: every field of its day, none of version 3's.
    old = QuestionRecord("multistep-vanilla", 9, queries=[["q"]], query_repetition_rate=0.5)
    line = json.loads(old.to_json())
    for added in ("trajectory", "stop_reason", "near_repeat_rate"):
        del line[added]
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"record_schema": 2}))
    (folder / "predictions.jsonl").write_text(json.dumps(line) + "\n")
    (record,) = load_records(folder)
    assert record == old
    assert record.trajectory is None and record.stop_reason is None
    assert record.near_repeat_rate is None and record.query_repetition_rate == 0.5


def test_a_trajectory_step_that_is_not_a_step_names_the_line(tmp_path):
    path = tmp_path / "predictions.jsonl"
    bad = json.loads(agent_record().to_json())
    bad["trajectory"][1] = "read Edinburgh"
    path.write_text(json.dumps(bad) + "\n{}\n")
    with pytest.raises(RecordError, match="line 1 has a trajectory step that is not a step"):
        read_records(path)
    bad["trajectory"][1] = {"action": "read", "outcome": "fine"}
    path.write_text(json.dumps(bad) + "\n{}\n")
    with pytest.raises(RecordError, match="line 1: unknown step outcome 'fine'"):
        read_records(path)


def test_a_newer_folder_is_refused_with_the_fix(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"record_schema": SCHEMA_VERSION + 1}))
    (folder / "predictions.jsonl").write_text('{"condition": "naive", "id": 1}\n')
    with pytest.raises(RecordError, match="upgrade frames-dspy"):
        load_records(folder)
    with pytest.raises(RecordError, match="not a version"):
        folder_schema({"record_schema": "two"}, folder=folder)
    assert folder_schema(None, folder=folder) == 1


def test_a_line_that_is_not_a_record_names_the_line_and_the_fix(tmp_path):
    path = tmp_path / "predictions.jsonl"
    path.write_text('{"condition": "naive", "id": 1}\n{"id": 2}\n[3]\n')
    with pytest.raises(RecordError, match=r"line 2 has no condition .*new --out"):
        read_records(path)
    path.write_text('{"condition": "naive", "id": 1, "recall": [1.0]}\n[3]\n')
    with pytest.raises(RecordError, match="line 2 is not a JSON object"):
        read_records(path)


def test_a_run_folder_takes_records_only(tmp_path):
    run = RunFolder(tmp_path)
    with pytest.raises(TypeError, match="QuestionRecord"):
        run.append({"condition": "naive", "id": 1})
    run.append(QuestionRecord("naive", 1))
    assert run.records() == [QuestionRecord("naive", 1)]


def test_a_record_has_no_string_keys():
    with pytest.raises(TypeError):
        QuestionRecord("naive", 1)["correct"]  # type: ignore[index]


# --- the guard: outside records.py, record fields are read as attributes ----------------------

#: Receivers that are not records but share key names with them, and why they are dicts.
NOT_RECORDS = {
    "pred": "a dspy.Prediction (the program's outputs), read before the record exists",
    "rounds": "the rounds recorder of frames_dspy.programs.modules",
    "row": "an answer unlike plain's in benchmarks.main_command's own report",
    "a": "an Optuna trial's user attributes",
    "chosen.user_attrs": "an Optuna trial's user attributes",
    "c": "a figure of an experiment.json",
    "item": "a figure of an experiment.json",
    "report": "benchmarks.main_command's own result (seconds per set-up)",
    "usage": "one LM's token usage as DSPy's usage tracker totals it (runner._reported_tokens)",
}

#: Modules whose import means a module may hold records (records come from these only).
_RECORD_MODULES = (
    "frames_dspy.results.records",
    "frames_dspy.results.run_folder",
    "frames_dspy.results.summary",
    "frames_dspy.run.runner",
    "frames_dspy.results.tables",
    "frames_dspy.results.comparison",
    "optimize.study",
)


def imports_any(tree: ast.Module, modules: Sequence[str]) -> bool:
    """Whether the module imports (from) one of ``modules``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in modules:
            return True
        if isinstance(node, ast.Import) and any(a.name in modules for a in node.names):
            return True
    return False


def _string_key_reads(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            key, receiver = node.slice, node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop", "setdefault")
            and node.args
        ):
            key, receiver = node.args[0], node.func.value
        else:
            continue
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            yield node.lineno, key.value, ast.unparse(receiver)


def string_key_reads_of(
    keys: Iterable[str], *, importing: Sequence[str], receivers_not: Iterable[str], owner: Path
) -> list[str]:
    """``path:line: receiver['key']`` of each read of one of ``keys`` by a string key in the
    packages' modules that import one of ``importing`` (``owner``, the module that defines the
    keys, aside), on a receiver not named in ``receivers_not``: the guards' one scan."""
    keys, receivers_not = set(keys), set(receivers_not)
    offences = []
    for package in ("frames_dspy", "optimize", "benchmarks"):
        for path in sorted((REPO / package).rglob("*.py")):
            if path == owner:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            if not imports_any(tree, importing):
                continue
            for line, key, receiver in _string_key_reads(tree):
                if key in keys and receiver not in receivers_not:
                    offences.append(f"{path.relative_to(REPO)}:{line}: {receiver}[{key!r}]")
    return offences


def test_record_fields_are_read_as_attributes_outside_records_py():
    offences = string_key_reads_of(
        record_fields(),
        importing=_RECORD_MODULES,
        receivers_not=NOT_RECORDS,
        owner=REPO / "frames_dspy" / "results" / "records.py",
    )
    assert not offences, (
        "read record fields as attributes (record.correct), or, if the receiver is not a "
        "record, add it to NOT_RECORDS with the reason:\n" + "\n".join(offences)
    )


def test_the_guard_catches_a_string_key_read():
    tree = ast.parse(
        "from frames_dspy.results.records import QuestionRecord\nx = r['judge_method']\n"
    )
    assert imports_any(tree, _RECORD_MODULES)
    assert list(_string_key_reads(tree)) == [(2, "judge_method", "r")]
