"""Tests for frames_dspy.results.html_report and ``python -m frames_dspy.report html``.

The runs are real small runs: ``run_evaluation`` with DummyLMs on the three-question fixture
(the helpers of ``tests/commands/test_evaluate.py``), all six conditions. What the page's script
does with the data is tested in a real browser in ``tests/results/test_report_browser.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from frames_dspy.commands.report import main
from frames_dspy.results.comparison import CompareConfig, compare_runs
from frames_dspy.results.html_report import (
    gold_rounds,
    outcome,
    report_data,
    verdict_source,
)
from frames_dspy.results.records import QuestionRecord
from frames_dspy.run.evaluation import run_evaluation
from tests.commands.test_evaluate import LEITH, config_for, judge, program_lm

#: Run B answers question 1 right ("305") and question 0 wrong: flips both ways.
FLIPS = {"How many years passed": "305", "French Open men's singles": "Rafael Nadal"}


def read_predictions(path) -> list[dict]:
    """The JSON objects of a predictions.jsonl as written on disk."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def make_run(data, out: Path, answers: dict[str, str]) -> Path:
    run_evaluation(
        config_for(data, out), lm=program_lm({**LEITH, **answers}), judge_lm=judge(), progress=False
    )
    return out


@pytest.fixture
def run_a(data, tmp_path) -> Path:
    return make_run(data, tmp_path / "a", {})


def page_blob(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    blob = r'<script type="application/json" id="report-data">(.*?)</script>'
    found = re.search(blob, text, re.S)
    assert found, "no data blob in the page"
    return json.loads(found.group(1))


def test_evaluate_writes_a_self_contained_page_with_every_record(run_a):
    page = run_a / "report.html"
    text = page.read_text(encoding="utf-8")
    # Nothing is fetched: no external script, stylesheet, image or font.
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", text)
    assert "<link" not in text and "@import" not in text and "url(http" not in text
    assert text.count("data:image/png;base64,") == 2
    blob = page_blob(page)
    records = read_predictions(run_a / "predictions.jsonl")
    assert len(blob["rows"]) == len(records) == 18
    assert {(r["c"], r["i"]) for r in blob["rows"]} == {
        (r["condition"], str(r["id"])) for r in records
    }
    assert set(blob["questions"]) == {"0", "1", "2"}
    assert blob["questions"]["2"][4] == ["Alexander Graham Bell", "Edinburgh", "Water of Leith"]
    # The header names the models, the cache and the data hashes of config.json.
    config = json.loads((run_a / "config.json").read_text())
    assert config["dataset_sha256"] in text and config["corpus_sha256"] in text
    assert "<th>cache</th><td>on</td>" in text
    assert "Embedded engine" not in text  # no embedded model ran
    # The title names the run once, then what it ran.
    title = re.search(r"<title>(.*?)</title>", text).group(1)
    assert title == f"{run_a.parent.name}/a — frames-dspy report"
    assert '<p class="subtitle">local: 6 condition(s) x 3 question(s)</p>' in text
    # ... and the notes heading table.md (models, judge, cache; self-judging, early stops).
    assert '<p class="note">program LM: dummy; judge: dummy; LM cache: on</p>' in text


def test_text_that_looks_like_markup_stays_text(data, tmp_path):
    hostile = "</script><!--<script>alert(1)</script> & <b>bold</b>"
    run = make_run(data, tmp_path / "run", {"French Open men's singles": hostile})
    text = (run / "report.html").read_text(encoding="utf-8")
    assert "alert(1)</script>" not in text and "<b>bold" not in text
    answers = {r["a"] for r in page_blob(run / "report.html")["rows"] if r["i"] == "0"}
    assert answers == {hostile}


def test_answer_in_context_is_recorded_and_summed(run_a):
    records = read_predictions(run_a / "predictions.jsonl")
    flags = {(r["condition"], r["id"]): r["answer_in_context"] for r in records}
    assert {flags[("naive", i)] for i in range(3)} == {None}  # no context
    # "305" is computed from two dates: no article says it; the names are in the articles.
    assert flags[("oracle", 1)] is False
    assert flags[("oracle", 0)] is True and flags[("oracle", 2)] is True
    summary = json.loads((run_a / "summary.json").read_text())
    assert summary["oracle"]["answer_in_context_n"] == 3
    assert summary["oracle"]["answer_in_context"] == pytest.approx(2 / 3)
    # Question 2 is answered wrong with "Water of Leith" in front of the model.
    assert summary["oracle"]["wrong_with_answer_in_context"] == 1
    assert summary["naive"]["answer_in_context"] is None
    table = (run_a / "table.md").read_text()
    assert "answer in context (n)" in table
    assert "| oracle | 3 |" in table and "| 0.667 (3) |" in table


def test_rows_carry_outcome_verdict_source_and_gold_rounds():
    def base(**fields):
        return QuestionRecord(**{"condition": "x", "id": 1, "correct": False,
                                 "judge_method": "judge", **fields})  # fmt: skip

    assert outcome(base(correct=True)) == "correct"
    assert outcome(base()) == "wrong"
    assert outcome(base(error="RuntimeError('boom')")) == "failed"
    assert outcome(base(correct=None, judge_method="judge_error")) == "judge error"
    assert verdict_source("exact") == "rule"
    assert verdict_source("judge") == "lm"
    assert verdict_source(None) == "none"
    rounds = [["a", "c"], ["a", "c", "b"]]
    assert gold_rounds(base(gold_ids=["b", "a", "z"], context_ids=rounds)) == [2, 1, None]
    assert gold_rounds(base(gold_ids=["b"], context_ids=[])) == [None]


def test_two_runs_show_the_flips_of_compare(data, tmp_path, run_a):
    run_b = make_run(data, tmp_path / "b", FLIPS)
    data_two = report_data(run_a, run_b)
    expected = compare_runs(CompareConfig(str(run_a), str(run_b)))
    pairs = data_two["comparison"]["pairs"]
    assert [p["condition_a"] for p in pairs] == [p.condition_a for p in expected.pairs]
    for got, want in zip(pairs, expected.pairs, strict=True):
        assert got["accuracy_ci95"] == want.accuracy_ci95
        assert got["a_to_b"]["ids"] == want.a_to_b.ids == [1]
        assert got["b_to_a"]["ids"] == want.b_to_a.ids == [0]
    assert {r["run"] for r in data_two["rows"]} == {0, 1}
    assert len(data_two["rows"]) == 36


def test_command_line_writes_the_page_where_asked(data, tmp_path, run_a, capsys):
    (run_a / "report.html").unlink()
    assert main(["html", str(run_a)]) == 0
    assert (run_a / "report.html").is_file()
    assert capsys.readouterr().out.strip() == str(run_a / "report.html")
    run_b = make_run(data, tmp_path / "b", FLIPS)
    out = tmp_path / "pages" / "ab.html"
    out.parent.mkdir()
    assert main(["html", str(run_a), str(run_b), "-o", str(out), "--bootstrap", "200"]) == 0
    assert page_blob(out)["comparison"]["bootstrap"] == 200


def test_command_line_errors_name_the_problem(tmp_path, run_a, capsys):
    assert main(["html", str(tmp_path / "nowhere")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["html", str(tmp_path / "empty")]) == 2
    assert "no config.json" in capsys.readouterr().err
    assert main(["html", str(run_a), "--condition", "oracle"]) == 2
    assert "need RUN_B" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["pdf", str(run_a)])
    assert exit_info.value.code == 2


def test_the_engine_record_is_a_small_table(run_a):
    config_path = run_a / "config.json"
    config = json.loads(config_path.read_text())
    engine = {
        "isolation": "process",
        "n_ctx": 8192,
        "n_threads": 2,
        "extra_buffers": False,
        "worker_restarts": 0,
        "cpu": "Some Xeon (avx2, amx_tile)",
        "llama_cpp_system_info": "CPU : SSE3 = 1 | AVX = 1 | " * 40,
    }
    config["engines"] = {"program": engine, "judge": {**engine, "n_ctx": 4096}}
    config_path.write_text(json.dumps(config))
    assert main(["html", str(run_a)]) == 0
    text = (run_a / "report.html").read_text(encoding="utf-8")
    table = re.search(r'<div class="engines">(.*?)</div>', text, re.S).group(1)
    assert "<th>program</th><th>judge</th>" in table
    assert "<tr><th>n_ctx</th><td>8192</td><td>4096</td></tr>" in table
    assert "<tr><th>cpu</th><td>Some Xeon (avx2, amx_tile)</td>" in table
    # llama.cpp's long system info is folded away, not a cell of JSON.
    assert "<th>llama_cpp_system_info</th>" not in table
    assert "<summary>llama_cpp_system_info (program)</summary>" in table
    assert '{"isolation"' not in text


def test_a_retrieval_only_run_shows_no_accuracy(data, tmp_path):
    out = tmp_path / "ro"
    config = config_for(data, out, conditions=["bm25-2"], retrieval_only=True)
    run_evaluation(config, lm=program_lm(), judge_lm=judge(), progress=False)
    text = (out / "report.html").read_text(encoding="utf-8")
    row = re.search(r"<tr><td>bm25-2</td>(.*?)</tr>", text).group(1)
    cells = re.findall(r"<td>(.*?)</td>", row)
    assert cells[1:3] == ["—", "—"]  # accuracy and its interval: not measured


def test_an_agents_row_carries_its_trajectory_and_the_page_its_search_table(data, tmp_path):
    from tests.commands.test_agent_runs import agent_lm

    out = tmp_path / "agent"
    config = config_for(data, out, conditions=["agent", "multistep-vanilla"])
    run_evaluation(config, lm=agent_lm(), judge_lm=judge(), progress=False)
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "How the LM searched" in page and "near-repeated queries" in page
    blob = page_blob(out / "report.html")
    rows = {(r["c"], r["i"]): r for r in blob["rows"]}
    bell = rows[("agent", "2")]
    assert [step[:3] for step in bell["tj"]] == [
        ["search", "Alexander Graham Bell", "ok"],
        ["read", "1", "ok"],
        ["finish", "", "ok"],
    ]
    assert bell["tj"][1][3].startswith("Alexander Graham Bell: ")  # what came back, short
    assert all(isinstance(step[4], int) and step[4] > 0 for step in bell["tj"])
    assert bell["sr"] == "finish" and bell["nr"] == 0.0
    # Gold articles: read at step 2 (Bell); the others were never shown by its search.
    assert bell["g"] == [2, None, None] and bell["gs"][0] == 1
    assert set(blob["malformed"]) == {"unknown_tool", "no_argument", "unreadable"}
    vanilla = rows[("multistep-vanilla", "2")]
    assert vanilla["tj"] is None and vanilla["sr"] is None and vanilla["gs"] is None
    assert vanilla["nr"] is not None
