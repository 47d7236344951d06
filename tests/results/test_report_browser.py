"""report.html in a real browser: Debian's headless Chromium, driven by Selenium.

The page is that of a real small run (``run_evaluation`` with DummyLMs on the three-question
fixture, all six conditions). The test applies the filters and checks the row counts against
``predictions.jsonl``, reopens a row from its anchor, compares two runs' flipped questions with
``compare_runs``, and saves a screenshot it checks is not blank. The browser is offline (see
``benchmarks.report_html.chromium``). Without Chromium, its driver or Selenium the tests skip
saying how to install them (fail under ``CI=true``: ``.ci/run`` installs them); ``-m "not
browser"`` leaves them out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PIL import Image
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from benchmarks.report_html import BrowserMissing, chromium, measure, open_page, synthetic_run
from frames_dspy.commands.report import main
from frames_dspy.judge.autorater import is_rule_method
from frames_dspy.results.comparison import CompareConfig, compare_runs
from tests.needs import missing
from tests.results.test_report_html import FLIPS, make_run

pytestmark = pytest.mark.browser


def read_predictions(path) -> list[dict]:
    """The JSON objects of a predictions.jsonl as written on disk."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@pytest.fixture(scope="module")
def browser() -> Iterator:
    try:
        with chromium() as driver:
            yield driver
    except BrowserMissing as err:
        missing(str(err))


def count(driver) -> int:
    return int(driver.find_element(By.ID, "count").text)


def choose(driver, name: str, value: str) -> None:
    Select(driver.find_element(By.ID, f"f-{name}")).select_by_value(value)


def search(driver, text: str) -> None:
    box = driver.find_element(By.ID, "f-search")
    box.clear()
    if text:
        box.send_keys(text)


def reset(driver) -> None:
    driver.find_element(By.ID, "f-reset").click()


def matching(records: list[dict], test: Callable[[dict], bool]) -> int:
    return sum(1 for r in records if test(r))


def test_filters_count_what_predictions_jsonl_holds(browser, data, tmp_path):
    run = make_run(data, tmp_path / "run", {})
    records = read_predictions(run / "predictions.jsonl")
    open_page(browser, run / "report.html")
    assert count(browser) == len(records) == 18
    assert browser.find_element(By.ID, "page-info").text == "page 1 of 1"

    checks = [
        ("condition", "oracle", lambda r: r["condition"] == "oracle"),
        ("outcome", "correct", lambda r: r["correct"] is True),
        ("outcome", "wrong", lambda r: r["correct"] is False and not r["error"]),
        ("type", "Numerical reasoning", lambda r: "Numerical reasoning" in r["reasoning_types"]),
        ("source", "rule", lambda r: is_rule_method(r["judge_method"])),
        ("source", "lm", lambda r: r["judge_method"] == "judge"),
        ("ngold", "3", lambda r: r["n_gold"] == 3),
        ("aic", "yes", lambda r: r["answer_in_context"] is True),
        ("aic", "no", lambda r: r["answer_in_context"] is False),
        ("aic", "no context", lambda r: r["condition"] == "naive"),
    ]
    for name, value, test in checks:
        reset(browser)
        choose(browser, name, value)
        expected = matching(records, test)
        assert count(browser) == expected, (name, value)
        assert len(browser.find_elements(By.CSS_SELECTOR, "tr.row")) == expected
    assert {matching(records, t) for _, _, t in checks} != {0}

    reset(browser)
    choose(browser, "condition", "oracle")
    choose(browser, "outcome", "wrong")
    assert count(browser) == matching(
        records, lambda r: r["condition"] == "oracle" and r["correct"] is False
    )
    reset(browser)
    search(browser, "leith")
    assert count(browser) == matching(
        records, lambda r: "leith" in json.dumps(r, ensure_ascii=False).lower()
    )
    search(browser, "nothing like this anywhere")
    assert count(browser) == 0


def test_an_anchor_reopens_its_row_and_the_page_is_drawn(browser, data, tmp_path):
    run = make_run(data, tmp_path / "run", {})
    open_page(browser, run / "report.html", "#row=oracle/2")
    row = browser.find_element(By.ID, "row-oracle/2")
    assert "target" in row.get_attribute("class")
    detail = browser.find_element(By.ID, "detail-oracle/2").text
    assert "Which river flows through the capital" in detail
    assert "Water of Leith: found in round 1" in detail
    assert "answer in context\nyes" in detail
    # Clicking a row opens its details too; its link is the anchor that reopens it.
    browser.find_element(By.ID, "row-naive/0").click()
    link = browser.find_element(By.CSS_SELECTOR, '#detail-naive\\/0 a[href^="#row="]')
    assert link.get_attribute("href").endswith("#row=naive%2F0")

    shot = tmp_path / "report.png"
    assert browser.save_screenshot(str(shot))
    image = Image.open(shot).convert("RGB")
    assert image.size[0] >= 1000
    colours = image.getcolors(maxcolors=1 << 20)
    assert len(colours) > 50  # text, badges and plots, not a blank page
    white = max((n for n, rgb in colours if rgb == (255, 255, 255)), default=0)
    assert white < 0.95 * image.size[0] * image.size[1]


def test_two_runs_show_each_pairs_flips(browser, data, tmp_path):
    run_a = make_run(data, tmp_path / "a", {})
    run_b = make_run(data, tmp_path / "b", FLIPS)
    out = tmp_path / "ab.html"
    assert main(["html", str(run_a), str(run_b), "-o", str(out)]) == 0
    open_page(browser, out)
    expected = compare_runs(CompareConfig(str(run_a), str(run_b)))
    to_b = browser.find_elements(By.CSS_SELECTOR, ".flips-a-to-b .flip")
    to_a = browser.find_elements(By.CSS_SELECTOR, ".flips-b-to-a .flip")
    assert len(to_b) == sum(p.a_to_b.count for p in expected.pairs) == 6
    assert len(to_a) == sum(p.b_to_a.count for p in expected.pairs) == 6
    assert {f.get_attribute("data-id") for f in to_b} == {"1"}
    assert "Rafael Nadal" in to_a[0].text
    assert count(browser) == 36
    choose(browser, "run", "B")
    assert count(browser) == len(read_predictions(Path(run_b) / "predictions.jsonl"))


def test_markup_in_an_answer_is_shown_as_text(browser, data, tmp_path):
    hostile = "</script><!--<script>alert(1)</script> & <b>bold</b>"
    run = make_run(data, tmp_path / "run", {"French Open men's singles": hostile})
    open_page(browser, run / "report.html", "#row=oracle/0")
    assert hostile in browser.find_element(By.ID, "detail-oracle/0").text
    assert browser.find_elements(By.TAG_NAME, "b") == []
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018 - reading it is what raises


def test_an_agents_row_shows_its_trajectory_step_by_step(browser, data, tmp_path):
    from frames_dspy.run.evaluation import run_evaluation
    from tests.commands.test_agent_runs import agent_lm
    from tests.commands.test_evaluate import config_for, judge

    out = tmp_path / "agent"
    run_evaluation(
        config_for(data, out, conditions=["agent"]), lm=agent_lm(), judge_lm=judge(), progress=False
    )
    open_page(browser, out / "report.html", "#row=agent/2")
    detail = browser.find_element(By.ID, "detail-agent/2").text
    assert "trajectory (3 steps, stopped by finish)" in detail
    assert "search Alexander Graham Bell → Alexander Graham Bell" in detail
    assert "read 1 → Alexander Graham Bell: " in detail
    assert "Alexander Graham Bell: read at step 2" in detail
    assert "Edinburgh: never shown" in detail
    assert "recall per step" in detail and "queries per round" not in detail
    assert "How the LM searched" in browser.find_element(By.TAG_NAME, "body").text


@pytest.mark.real
def test_a_full_size_page_loads_and_its_anchor_reopens_a_row(browser, real_data, tmp_path):
    folder = synthetic_run(tmp_path / "run", questions=120, dataset=real_data.questions)
    result = measure(folder)
    assert result["rows"] == 6 * 120
    assert result["anchor_opened_row"] is True
    assert 0 < result["search_matches"] < result["rows"]
    assert result["load_seconds"] < 30
