"""Tests for frames_dspy.evaluate: resuming run folders, bad input, and a whole tiny run.

The LMs are always DummyLMs: injected into ``run_evaluation``, or put in place of
``frames_dspy.lm.make_lm`` when going through ``main()``. The data is
``tests/fixtures/eval_frames.csv`` (3 questions) and ``tests/fixtures/eval_corpus.jsonl``
(9 articles), copied to a temporary folder so no alias table or distractor file is picked up.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import dspy
import pytest
from dspy.utils.dummies import DummyLM

from frames_dspy.commands import evaluate
from frames_dspy.data.corpus import load_corpus
from frames_dspy.data.questions import dataset_fingerprint, load_frames
from frames_dspy.judge import AUTORATER
from frames_dspy.programs import CONDITIONS, Naive, save_program
from frames_dspy.results import tables
from frames_dspy.run.evaluation import EvalConfig, run_evaluation

FIXTURES = Path(__file__).parents[1] / "fixtures"
REPO = Path(__file__).resolve().parents[2]
ALL = list(CONDITIONS)


def program_lm(by_question: dict[str, str] | None = None) -> DummyLM:
    """Answers every question "Novak Djokovic" (or ``by_question[words in it]``); writes two
    queries per query step."""
    return DummyLM(
        {
            "`[[ ## plan ## ]]`": {
                "plan": "find the missing entities",
                "queries": ["Edinburgh capital of Scotland", "Trinity College Dublin founded"],
            },
            "`[[ ## queries ## ]]`": {"queries": ["Dracula novel 1897", "MLS Cup 2021"]},
            **{words: {"answer": answer} for words, answer in (by_question or {}).items()},
            "`[[ ## answer ## ]]`": {"answer": "Novak Djokovic"},
        }
    )


#: An answer to question 2 ("Water of Leith") that no rule decides, so the judge is asked.
LEITH = {"country where Alexander Graham Bell was born": "The Leith"}


def judge() -> DummyLM:
    # The autorater's default protocol first asks which answer a response commits to.
    return DummyLM(
        {
            "`[[ ## decision ## ]]`": {"explanation": "no", "decision": "FALSE"},
            "`[[ ## answer ## ]]`": {"answer": "The Leith"},
        }
    )


def config_for(data, out, **overrides) -> EvalConfig:
    settings = {
        "dataset": str(data["dataset"]),
        "corpus": str(data["corpus"]),
        "distractors": "none",
        "rounds": 2,
        "k": 2,
        "n_docs": 2,
        "context_tokens": 400,
        "out": str(out),
    }
    settings.update(overrides)
    return EvalConfig(**settings)


def lines_of(run_dir: Path) -> list[str]:
    return (run_dir / "predictions.jsonl").read_text(encoding="utf-8").splitlines()


def keys_of(run_dir: Path) -> Counter:
    return Counter((r["condition"], r["id"]) for r in map(json.loads, lines_of(run_dir)))


# --- a whole run --------------------------------------------------------------------------------


def test_end_to_end_all_six_conditions_then_resume(data, tmp_path):
    out = tmp_path / "run"
    lm, judge_lm = program_lm(LEITH), judge()
    summary = run_evaluation(config_for(data, out), lm=lm, judge_lm=judge_lm, progress=False)

    assert list(summary.rows) == ALL
    assert all(row.n == 3 for row in summary.rows.values())
    for name in ("config.json", "predictions.jsonl", "summary.json", "table.md"):
        assert (out / name).is_file(), name

    config = json.loads((out / "config.json").read_text())
    assert config["dataset_sha256"] == dataset_fingerprint(load_frames(data["dataset"]))
    assert config["corpus_sha256"] == load_corpus(data["corpus"]).fingerprint
    assert config["corpus_articles"] == 9
    assert config["settings"]["dataset"] == str(data["dataset"])
    assert config["settings"]["rounds"] == 2
    assert config["selected_ids"] == [0, 1, 2]
    assert config["packages"]["dspy"] == dspy.__version__
    assert "frames-dspy" in config["packages"]

    keys = keys_of(out)
    assert len(lines_of(out)) == 6 * 3
    assert set(keys) == {(c, i) for c in ALL for i in range(3)}
    assert set(keys.values()) == {1}

    records = [json.loads(line) for line in lines_of(out)]
    by_key = {(r["condition"], r["id"]): r for r in records}
    # Question 0's gold is "Novak Djokovic": a rule says TRUE and the judge is not asked.
    for condition in ALL:
        assert by_key[(condition, 0)]["correct"] is True
        assert by_key[(condition, 0)]["judge_method"] == "exact"
    # Question 1's gold is 305: "Novak Djokovic" gives no number (a rule); question 2's answer
    # "The Leith" for "Water of Leith" is left to the judge.
    for condition in ALL:
        assert by_key[(condition, 1)]["judge_method"] == "no_quantity"
        assert by_key[(condition, 2)]["judge_method"] == "judge"
    judged = [r for r in records if r["judge_method"] == "judge"]
    assert len(judged) == 6 * 1
    assert len(judge_lm.history) == 2 * len(judged)  # an extraction the rules cannot use, a verdict
    assert all(r["judge_p_true"] is None for r in records)  # the fake judge gives no logprobs
    assert config["settings"]["autorater"] == AUTORATER
    rows = json.loads((out / "summary.json").read_text())
    assert all(row["rule_verdicts"] == 2 and row["lm_verdicts"] == 1 for row in rows.values())
    assert "verdicts rules/LM" in (out / "table.md").read_text()
    # The program LM never judges: its calls are answers and query steps only.
    assert all("decision" not in h["messages"][0]["content"] for h in lm.history)
    # Oracle sees every gold article; multi-step keeps one context per round.
    for i in range(3):
        oracle = by_key[("oracle", i)]
        assert oracle["recall"] == [1.0]
        assert oracle["context_ids"][0] == oracle["gold_ids"]
        for condition in ("multistep-vanilla", "multistep-planning"):
            multi = by_key[(condition, i)]
            assert len(multi["context_ids"]) == len(multi["queries"]) == 2
            assert all(len(q) <= 2 for q in multi["queries"])
            assert len(multi["recall"]) == 2
        assert len(by_key[("bm25-2", i)]["context_ids"][0]) <= 2
        assert len(by_key[("bm25-4", i)]["context_ids"][0]) <= 4
    assert by_key[("naive", 1)]["context_ids"] == []
    assert "| multistep-planning |" in (out / "table.md").read_text()

    # Same settings, same folder: nothing is run again.
    before = (out / "predictions.jsonl").read_bytes()
    calls = len(lm.history), len(judge_lm.history)
    again = run_evaluation(config_for(data, out), lm=lm, judge_lm=judge_lm, progress=False)
    assert (out / "predictions.jsonl").read_bytes() == before
    assert (len(lm.history), len(judge_lm.history)) == calls
    assert again.rows == summary.rows

    # Other settings on the same folder are refused, naming the difference.
    with pytest.raises(ValueError, match=r"rounds: 2 -> 3") as info:
        run_evaluation(config_for(data, out, rounds=3), lm=lm, judge_lm=judge_lm, progress=False)
    assert "choose a new --out" in str(info.value)
    assert (out / "predictions.jsonl").read_bytes() == before


def test_resume_adds_only_the_missing_questions(data, tmp_path):
    out = tmp_path / "run"
    both = ["naive", "oracle"]
    run_evaluation(
        config_for(data, out, conditions=both, ids=[0, 1]),
        lm=program_lm(),
        judge_lm=judge(),
        progress=False,
    )
    assert set(keys_of(out)) == {(c, i) for c in both for i in (0, 1)}
    lm = program_lm()
    run_evaluation(config_for(data, out, conditions=both), lm=lm, judge_lm=judge(), progress=False)
    keys = keys_of(out)
    assert set(keys) == {(c, i) for c in both for i in range(3)}
    assert set(keys.values()) == {1}
    assert len(lm.history) == 2  # question 2 under naive and under oracle


def test_a_run_scored_by_the_old_autorater_is_not_resumed(data, tmp_path):
    out = tmp_path / "run"
    config = config_for(data, out, conditions=["naive"], ids=[0])
    run_evaluation(config, lm=program_lm(), judge_lm=judge(), progress=False)
    saved = json.loads((out / "config.json").read_text())
    # A folder made before the rules and the LM judge were joined: the overlap guard's setting.
    del saved["settings"]["autorater"]
    saved["settings"]["judge_min_overlap"] = 0.5
    (out / "config.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match=r"autorater: None -> 'rules\+judge"):
        run_evaluation(
            config_for(data, out, conditions=["naive"]),
            lm=program_lm(),
            judge_lm=judge(),
            progress=False,
        )
    # Its records still read and summarise.
    assert tables.summarize(tables.load_records(out))["naive"].n == 1


def test_resume_with_only_some_of_the_conditions(data, tmp_path):
    # BUG (evaluate.run_evaluation / _check_resume): a naive-only run loads no store, so its
    # corpus_sha256 is None; resuming a folder made with retrieval conditions using
    # --conditions naive (same --corpus) is refused with "corpus_sha256 changed".
    out = tmp_path / "run"
    run_evaluation(
        config_for(data, out, conditions=["naive", "oracle"], ids=[0, 1]),
        lm=program_lm(),
        judge_lm=judge(),
        progress=False,
    )
    run_evaluation(
        config_for(data, out, conditions=["naive"]),
        lm=program_lm(),
        judge_lm=judge(),
        progress=False,
    )
    assert ("naive", 2) in keys_of(out)


def test_resume_repairs_a_torn_last_line(data, tmp_path):
    out = tmp_path / "run"
    config = dict(conditions=["naive"])
    run_evaluation(
        config_for(data, out, **config), lm=program_lm(), judge_lm=judge(), progress=False
    )
    lines = lines_of(out)
    # As if the writer was killed halfway through the last record.
    torn = "\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2]
    (out / "predictions.jsonl").write_text(torn, encoding="utf-8")
    run_evaluation(
        config_for(data, out, **config), lm=program_lm(), judge_lm=judge(), progress=False
    )
    repaired = lines_of(out)
    assert len(repaired) == 3
    assert all(json.loads(line) for line in repaired)
    assert set(keys_of(out).values()) == {1}


def _load_kill_script():
    spec = importlib.util.spec_from_file_location("eval_kill_run", FIXTURES / "eval_kill_run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kill_run(out: Path, *args: str, lines: int = 2, settle: float = 0.0) -> list[str]:
    """Start ``eval_kill_run.py --out OUT ARGS``, SIGKILL it once ``lines`` records are
    written (and ``settle`` seconds more), and return the complete lines it left."""
    predictions = out / "predictions.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, str(FIXTURES / "eval_kill_run.py"), "--out", str(out), *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            if predictions.is_file() and predictions.read_bytes().count(b"\n") >= lines:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(settle)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    written = predictions.read_bytes()
    return written[: written.rfind(b"\n") + 1].decode().splitlines()


def test_sigkill_mid_run_then_resume(tmp_path):
    out = tmp_path / "killed"
    complete = kill_run(out, "--delay", "0.2")

    script = _load_kill_script()
    total = len(script.CONDITIONS) * len(script.QUESTIONS)
    assert 2 <= len(complete) < total

    script.run(str(out), delay=0.0)
    lines = lines_of(out)
    assert lines[: len(complete)] == complete
    records = [json.loads(line) for line in lines]  # no torn line left behind
    keys = Counter((r["condition"], r["id"]) for r in records)
    expected = {(c, i) for c in script.CONDITIONS for i in range(len(script.QUESTIONS))}
    assert set(keys) == expected
    assert set(keys.values()) == {1}
    assert (out / "summary.json").is_file()


def test_threads_write_every_question_once(data, tmp_path):
    out = tmp_path / "run"
    run_evaluation(
        config_for(data, out, conditions=["naive", "oracle", "bm25-2"], threads=3),
        lm=program_lm(),
        judge_lm=judge(),
        progress=False,
    )
    keys = keys_of(out)
    assert len(keys) == 9 and set(keys.values()) == {1}


@pytest.mark.parametrize(
    ("model", "threads", "expected"),
    [
        ("local", None, 1),  # the embedded model serialises its calls
        ("local:/models/any.gguf", None, 1),
        ("openai/gpt-4o-mini", None, 8),  # an API model
        ("openai/my-model", None, 8),  # a server (with --api-base)
        ("openai/gpt-4o-mini", 3, 3),  # --threads given wins
        ("local", 2, 2),
    ],
)
def test_threads_default_follows_the_model_and_config_json_records_it(
    data, tmp_path, model, threads, expected
):
    out = tmp_path / "run"
    config = config_for(data, out, conditions=["naive"], model=model, threads=threads)
    run_evaluation(config, lm=program_lm(), judge_lm=judge(), progress=False)
    recorded = json.loads((out / "config.json").read_text())["settings"]
    assert recorded["threads"] == expected
    assert config.threads == threads  # the caller's config is left as it was


def test_help_says_how_the_threads_default_is_chosen(capsys):
    with pytest.raises(SystemExit):
        evaluate.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "1 for an embedded model, which serialises its calls; 8 for an API model or server" in (
        text
    )


# --- failures inside a run --------------------------------------------------------------------


class FailingRetriever:
    """Real retrieval, except that a question mentioning ``trigger`` raises."""

    def __init__(self, inner, trigger: str):
        self.inner, self.store, self.trigger = inner, inner.store, trigger

    def search(self, query, k, *, exclude=()):
        if self.trigger in query:
            raise RuntimeError(f"index broken for {query[:20]!r}")
        return self.inner.search(query, k, exclude=exclude)

    def search_many(self, queries, k, *, exclude=()):
        return [self.search(q, k, exclude=exclude) for q in queries]


def test_a_failing_question_is_recorded_and_the_run_goes_on(data, tmp_path):
    from frames_dspy.retrieval.bm25 import build_retriever

    store = load_corpus(data["corpus"])
    retriever = FailingRetriever(build_retriever(store, index_dir=tmp_path / "idx"), "Dracula")
    out = tmp_path / "run"
    summary = run_evaluation(
        config_for(data, out, conditions=["bm25-2"]),
        lm=program_lm(),
        judge_lm=judge(),
        store=store,
        retriever=retriever,
        progress=False,
    )
    records = {r["id"]: r for r in map(json.loads, lines_of(out))}
    assert set(records) == {0, 1, 2}
    failed = records[1]
    assert "RuntimeError" in failed["error"] and "index broken" in failed["error"]
    assert failed["answer"] == ""
    assert failed["correct"] is False and failed["judge_method"] == "empty"
    assert records[0]["error"] is None and records[0]["correct"] is True
    assert summary.rows["bm25-2"].program_errors == 1


def test_an_lm_setup_error_stops_the_run(data, tmp_path):
    from frames_dspy.lm import LMSetupError

    class BrokenLM(DummyLM):
        def __call__(self, *args, **kwargs):
            raise LMSetupError("the model file is missing; run make_lm again")

    out = tmp_path / "run"
    with pytest.raises(RuntimeError, match="model file is missing"):
        run_evaluation(
            config_for(data, out, conditions=["naive"]),
            lm=BrokenLM([]),
            judge_lm=judge(),
            progress=False,
        )
    predictions = out / "predictions.jsonl"
    assert not predictions.exists() or predictions.read_text() == ""


# --- bad input ----------------------------------------------------------------------------------


def test_run_evaluation_rejects_an_unknown_condition(data, tmp_path):
    with pytest.raises(ValueError, match=r"unknown condition 'bm25'") as info:
        run_evaluation(
            config_for(data, tmp_path / "run", conditions=["naive", "bm25"]),
            lm=program_lm(),
            judge_lm=judge(),
        )
    assert "multistep-planning" in str(info.value)
    assert "bm25-N" in str(info.value)


@pytest.mark.parametrize("name", ["bm25-0", "bm25-x", "bm25--2", "bm25-1.5"])
def test_run_evaluation_rejects_a_bad_bm25_n(data, tmp_path, name):
    with pytest.raises(ValueError, match=r"N in bm25-N must be a whole number of at least 1"):
        run_evaluation(
            config_for(data, tmp_path / "run", conditions=[name]),
            lm=program_lm(),
            judge_lm=judge(),
        )


def test_bm25_n_retrieves_n_articles_for_the_question(data, tmp_path):
    out = tmp_path / "run"
    summary = run_evaluation(
        config_for(data, out, conditions=["bm25-3", "bm25-1"]),
        lm=program_lm(),
        judge_lm=judge(),
        progress=False,
    )
    assert set(summary.rows) == {"bm25-3", "bm25-1"}
    records = [json.loads(line) for line in lines_of(out)]
    found = {(r["condition"], r["id"]): r["context_ids"] for r in records}
    for record in records:
        assert record["queries"] == [[record["question"]]]
    for i in range(3):
        one, three = found["bm25-1", i], found["bm25-3", i]
        # The tiny corpus may hold fewer than 3 articles that match a question at all.
        assert len(one[0]) == 1 and 1 < len(three[0]) <= 3
        assert three[0][0] == one[0][0]
    config = json.loads((out / "config.json").read_text())
    assert config["programs"]["bm25-3"]["n_docs"] == 3


def test_a_run_of_phrases_n_alone_builds_the_retriever_it_needs(data, tmp_path):
    # Which conditions need a retriever comes from their classes (NEEDS), not a list of kinds.
    config = config_for(data, tmp_path / "run", conditions=["phrases-4"])
    summary = run_evaluation(config, lm=program_lm(), judge_lm=judge(), progress=False)
    assert summary.rows["phrases-4"].n == 3 and summary.rows["phrases-4"].program_errors == 0


def test_retrieval_only_makes_no_answer_or_judge_call(data, tmp_path):
    out = tmp_path / "run"
    lm, judge_lm = program_lm(), judge()
    summary = run_evaluation(
        config_for(data, out, conditions=["bm25-2", "multistep-vanilla"], retrieval_only=True),
        lm=lm,
        judge_lm=judge_lm,
        progress=False,
    )
    records = [json.loads(line) for line in lines_of(out)]
    assert {r["answer"] for r in records} == {""}
    assert all(r["judge_method"] == "empty" for r in records)
    assert judge_lm.history == []
    # Only the query writer ran: two rounds, one call each, three questions.
    assert len(lm.history) == 6
    assert all("[[ ## answer ## ]]" not in str(h["messages"]) for h in lm.history)
    assert len(summary.rows["multistep-vanilla"].recall_by_round) == 2
    # Nothing was measured, so the tables say so instead of 0.000 [0.00, ...].
    table = (out / "table.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| bm25-2 |"))
    assert row.split(" | ")[2:4] == ["—", "—"]
    assert "0.000" not in (out / "by_reasoning_type.md").read_text()
    assert not (out / "accuracy_by_reasoning_type.png").exists()


def test_retrieval_only_rejects_naive(data, tmp_path):
    with pytest.raises(ValueError, match="drop naive"):
        run_evaluation(
            config_for(data, tmp_path / "run", conditions=["naive"], retrieval_only=True),
            lm=program_lm(),
            judge_lm=judge(),
        )


def wrong_shape_program(path: Path) -> Path:
    """A Naive program file whose spec claims a multi-step program."""
    save_program(Naive(), str(path))
    state = json.loads(path.read_text())
    state["frames_dspy_spec"] = {"kind": "multihop", "rounds": 2, "k": 2, "n_docs": 2}
    path.write_text(json.dumps(state))
    return path


def test_run_evaluation_rejects_a_program_of_another_shape(data, tmp_path):
    program = wrong_shape_program(tmp_path / "program.json")
    with pytest.raises(ValueError, match="different program shape"):
        run_evaluation(
            config_for(data, tmp_path / "run", conditions=["program"], program=str(program)),
            lm=program_lm(),
            judge_lm=judge(),
            progress=False,
        )


def test_run_evaluation_runs_a_saved_program(data, tmp_path):
    program = tmp_path / "program.json"
    save_program(Naive(), str(program), extra={"note": "compiled"})
    out = tmp_path / "run"
    summary = run_evaluation(
        config_for(data, out, conditions=["program"], program=str(program)),
        lm=program_lm(),
        judge_lm=judge(),
        progress=False,
    )
    assert list(summary.rows) == ["program"]
    assert set(keys_of(out)) == {("program", i) for i in range(3)}


def data_argv(data, out: Path, *, corpus: Path | None = None) -> list[str]:
    """The options of a run on the fixture data (``corpus`` instead of its corpus) without
    distractors, into ``out``."""
    return [
        "--dataset", str(data["dataset"]), "--corpus", str(corpus or data["corpus"]),
        "--distractors", "none", "--out", str(out),
    ]  # fmt: skip


def call_main(argv, capsys) -> tuple[int, str, str]:
    try:
        code = evaluate.main([*argv, "--quiet"])
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def no_real_lm(monkeypatch):
    """main() cannot take an LM; make sure it never builds a real one."""
    import frames_dspy.run.session

    made = []

    def fake_make_lm(spec, **kwargs):
        made.append(spec)
        return DummyLM(
            {
                "`[[ ## decision ## ]]`": {"explanation": "no", "decision": "FALSE"},
                "`[[ ## answer ## ]]`": {"answer": "Novak Djokovic"},
            }
        )

    monkeypatch.setattr(frames_dspy.run.session, "make_lm", fake_make_lm)
    return made


def test_main_unknown_condition(data, capsys, no_real_lm, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, _, err = call_main(
        ["--conditions", "naive,bm25-three", "--dataset", str(data["dataset"])], capsys
    )
    assert code == 2
    assert "bm25-three" in err
    assert "N in bm25-N must be a whole number of at least 1" in err
    assert "Traceback" not in err
    assert no_real_lm == []
    code, _, err = call_main(
        ["--conditions", "bm25,naive", "--dataset", str(data["dataset"])], capsys
    )
    assert code == 2
    assert "naive, bm25-2, bm25-4, oracle, multistep-vanilla, multistep-planning" in err
    assert no_real_lm == []


def test_main_ids_not_in_the_data(data, capsys, no_real_lm, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, _, err = call_main(
        ["--conditions", "naive", "--dataset", str(data["dataset"]), "--ids", "500-502"], capsys
    )
    assert code == 2
    assert err.startswith("error: ")
    assert "--ids [500, 501, 502] are not in the selected questions" in err
    assert "ids run 0..2" in err
    assert no_real_lm == []
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("argv", [["--ids", "a-b"], ["--ids", ","], ["--limit", "0"]])
def test_main_bad_selection_arguments(data, capsys, no_real_lm, argv):
    code, _, err = call_main(["--dataset", str(data["dataset"]), *argv], capsys)
    assert code == 2
    assert ("--ids" in err) or ("--limit 0" in err)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--context-tokens", "0"], "--context-tokens 0 must be at least 1"),
        (["--threads", "-2"], "--threads -2 must be at least 1"),
        (["--max-failure-rate", "1.5"], "--max-failure-rate 1.5 must be between 0 and 1"),
        (["--lm-timeout", "0"], "--lm-timeout 0 must be more than 0"),
        (["--max-cost", "-1"], "--max-cost -1 must be more than 0"),
        (["--cache", "maybe"], "invalid choice: 'maybe'"),
    ],
)
def test_main_bad_numbers_are_one_line_errors(data, capsys, no_real_lm, argv, message):
    code, _, err = call_main(["--dataset", str(data["dataset"]), *argv], capsys)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1
    assert no_real_lm == []


@pytest.mark.parametrize("where", ["file", "proc"])
def test_main_out_folder_that_cannot_be_written(data, capsys, no_real_lm, tmp_path, where):
    if where == "file":
        blocker = tmp_path / "a-file"
        blocker.write_text("x")
        out = blocker / "run"
    else:  # not writable even for root
        out = Path("/proc/frames-dspy-run")
    code, _, err = call_main(
        ["--conditions", "naive", "--dataset", str(data["dataset"]), "--out", str(out)], capsys
    )
    assert code == 2
    assert f"cannot write the run folder {out}" in err and "--out" in err
    assert len(err.strip().splitlines()) == 1 and no_real_lm == []


def test_main_oracle_without_gold_articles(data, capsys, no_real_lm, tmp_path):
    corpus = tmp_path / "other_corpus.jsonl"
    corpus.write_text(
        "\n".join(
            line
            for line in data["corpus"].read_text().splitlines()
            if '"moon"' in line or '"eiffel"' in line
        )
        + "\n"
    )
    argv = ["--conditions", "oracle", *data_argv(data, tmp_path / "run", corpus=corpus)]
    code, _, err = call_main(argv, capsys)
    assert code == 2
    assert "oracle condition needs gold articles" in err
    assert "--corpus" in err
    assert no_real_lm == []


def test_main_program_of_another_shape(data, capsys, no_real_lm, tmp_path):
    program = wrong_shape_program(tmp_path / "program.json")
    code, _, err = call_main(
        ["--program", str(program), *data_argv(data, tmp_path / "run")], capsys
    )
    assert code == 2
    assert "different program shape" in err
    assert str(program) in err


def test_main_missing_program_file(data, capsys, no_real_lm, tmp_path):
    code, _, err = call_main(
        ["--program", str(tmp_path / "nope.json"), "--dataset", str(data["dataset"])], capsys
    )
    assert code == 2
    assert "nope.json" in err and "does not exist" in err
    assert no_real_lm == []


def test_main_runs_and_prints_the_table(data, capsys, no_real_lm, tmp_path):
    out = tmp_path / "run"
    code, stdout, _ = call_main(["--conditions", "naive,oracle", *data_argv(data, out)], capsys)
    assert code == 0
    assert "| naive | 3 |" in stdout and "| oracle | 3 |" in stdout
    assert f"run folder: {out}" in stdout
    assert no_real_lm == ["local"]  # one LM, also used as the judge
    assert set(keys_of(out)) == {(c, i) for c in ("naive", "oracle") for i in range(3)}


# --- nothing hidden: partial recall, judge faults, budgets, estimates, notes -------------------


class AnswerFailsLM(DummyLM):
    """Writes queries, but every answer call fails (a server error that outlived its retries)."""

    def __call__(self, *args, **kwargs):
        messages = kwargs.get("messages") or (args[1] if len(args) > 1 else [])
        if "[[ ## answer ## ]]" in str(messages[0]["content"] if messages else ""):
            from frames_dspy.lm import LMCallError

            raise LMCallError("the server failed the answer call (tried 4 times)", attempts=4)
        return super().__call__(*args, **kwargs)


def test_a_failed_question_keeps_the_recall_of_what_it_retrieved(data, tmp_path):
    out = tmp_path / "run"
    summary = run_evaluation(
        config_for(data, out, conditions=["multistep-vanilla"]),
        lm=AnswerFailsLM({"`[[ ## queries ## ]]`": {"queries": ["Dracula novel 1897"]}}),
        judge_lm=judge(),
        progress=False,
    )
    records = [json.loads(line) for line in lines_of(out)]
    assert all(r["error_kind"] == "LMCallError" for r in records)
    # Each failed after two rounds of retrieval; what it found counts towards recall.
    assert all(len(r["context_ids"]) == 2 for r in records)
    assert all(isinstance(r["recall"], list) and len(r["recall"]) == 2 for r in records)
    row = summary.rows["multistep-vanilla"]
    assert row.program_errors == 3 and row.recall_n == 3
    assert row.program_errors_by_kind == {"LMCallError": 3}
    assert row.recall_by_round[-1] > 0


def test_a_judge_that_fails_gives_judge_errors_not_a_crash(data, tmp_path):
    class BrokenJudge(DummyLM):
        def __call__(self, *args, **kwargs):
            raise RuntimeError("judge server gone")

    out = tmp_path / "run"
    summary = run_evaluation(
        config_for(data, out, conditions=["naive"]),
        lm=DummyLM(
            {
                "country where Alexander Graham Bell was born": {"answer": "The Leith"},
                "`[[ ## answer ## ]]`": {"answer": "someone else"},
            }
        ),
        judge_lm=BrokenJudge([]),
        progress=False,
    )
    records = [json.loads(line) for line in lines_of(out)]
    # "someone else" names no form of Novak Djokovic and no number for 305 (rules); "The Leith"
    # for "Water of Leith" goes to the judge.
    assert sorted(r["judge_method"] for r in records) == [
        "different_name",
        "judge_error",
        "no_quantity",
    ]
    failed = [r for r in records if r["judge_method"] == "judge_error"]
    assert failed[0]["correct"] is None and "judge server gone" in failed[0]["judge_explanation"]
    assert summary.rows["naive"].judge_errors == 1 and summary.rows["naive"].accuracy == 0.0


def test_the_estimate_comes_before_any_lm_call(data, tmp_path):
    lm = program_lm()
    said = []

    def say(line):
        said.append((line, len(lm.history)))

    run_evaluation(
        config_for(data, tmp_path / "run", conditions=["naive", "multistep-planning"]),
        lm=lm,
        judge_lm=judge(),
        progress=False,
        say=say,
    )
    assert said[0][0].startswith("Cost estimate before any LM call")
    assert all(calls == 0 for _, calls in said)
    text = "\n".join(line for line, _ in said)
    assert "naive" in text and "multistep-planning" in text and "total" in text


def test_max_lm_calls_stops_cleanly_and_a_rerun_finishes(data, tmp_path):
    out = tmp_path / "run"
    first = run_evaluation(
        config_for(data, out, conditions=["naive", "oracle"], max_lm_calls=3),
        lm=program_lm(),
        judge_lm=judge(),
        progress=False,
    )
    assert first.stopped.startswith("--max-lm-calls 3 reached")
    kept = keys_of(out)
    assert 0 < sum(kept.values()) < 6 and all(n == 1 for n in kept.values())
    table = (out / "table.md").read_text()
    assert "STOPPED EARLY (--max-lm-calls 3 reached)" in table
    again = run_evaluation(
        config_for(data, out, conditions=["naive", "oracle"]),
        lm=program_lm(),
        judge_lm=judge(),
        progress=False,
    )
    assert again.stopped is None
    assert keys_of(out) == Counter({(c, i): 1 for c in ("naive", "oracle") for i in range(3)})


def test_max_cost_needs_a_priced_model(data, tmp_path):
    with pytest.raises(ValueError, match="--max-cost needs prices"):
        run_evaluation(
            config_for(data, tmp_path / "run", conditions=["naive"], max_cost=1.0),
            lm=program_lm(),
            judge_lm=judge(),
            progress=False,
        )


def test_table_header_says_how_the_run_was_made(data, tmp_path):
    out = tmp_path / "run"
    lm = program_lm()
    run_evaluation(
        config_for(data, out, conditions=["naive"], cache="refresh"), lm=lm, progress=False
    )
    table = (out / "table.md").read_text()
    assert "LM cache: refresh" in table
    assert "SELF-JUDGING" in table  # no judge given: the program's model judges itself
    config = json.loads((out / "config.json").read_text())
    assert config["settings"]["cache"] == "refresh"
    other = tmp_path / "other"
    run_evaluation(config_for(data, other, conditions=["naive"]), lm=lm, judge_lm=judge())
    assert "SELF-JUDGING" not in (other / "table.md").read_text()
    # Retrieval only: no judge runs, so there is no self-judging to warn of.
    bare = tmp_path / "retrieval"
    run_evaluation(
        config_for(data, bare, conditions=["bm25-2"], retrieval_only=True), lm=lm, progress=False
    )
    table = (bare / "table.md").read_text()
    assert "SELF-JUDGING" not in table
    assert "recall and the query writer's tokens are measured" in table


def test_no_lm_parts_run_beside_each_program_that_writes_queries(data, tmp_path):
    out = tmp_path / "run"
    lm = program_lm()
    config = config_for(
        data,
        out,
        conditions=["bm25-4", "multistep-vanilla"],
        question_docs=2,
        phrase_docs=2,
        retrieval_only=True,
        no_lm_parts=True,
    )
    summary = run_evaluation(config, lm=lm, judge_lm=judge(), progress=False)
    assert list(summary.rows) == ["bm25-4", "multistep-vanilla", "multistep-vanilla-no-lm"]
    records = [json.loads(line) for line in lines_of(out)]
    alone = [r for r in records if r["condition"] == "multistep-vanilla-no-lm"]
    written = [r for r in records if r["condition"] == "multistep-vanilla"]
    assert alone and all(r["lm_calls"] == 0 for r in alone)
    assert all(r["lm_calls"] == 2 for r in written)  # a query call per round, no answer
    # The same budget (the fixture's corpus is too small for the question to fill every
    # slot, so never more articles than with the LM's queries).
    # Paired by question: with several threads the two conditions' records come in any order.
    by_id = {w["id"]: w for w in written}
    assert sorted(by_id) == sorted(a["id"] for a in alone)
    assert all(len(a["context_ids"][-1]) <= len(by_id[a["id"]]["context_ids"][-1]) for a in alone)
    # The question and its phrases, never a written query.
    assert all(r["queries"][0][0] == r["question"] for r in alone)
    assert not {"Dracula novel 1897", "MLS Cup 2021"} & {q for r in alone for q in r["queries"][0]}
