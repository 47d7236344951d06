"""report.html at full size: 824 questions x 6 conditions, its size and its load time.

Run ``python -m benchmarks.report_html [--questions 824] [--out DIR] [--screenshot PNG]
[--json]`` with ``FRAMES_DATA_DIR`` pointing at the offline data. It writes a run folder of
synthetic records through the real writers (``RunFolder.append``, ``write_reports``,
``write_html_report``) for the real FRAMES questions, gold answers and reasoning types, with
answers, queries, context ids and judge explanations of the lengths real runs have, then opens
the page in headless Chromium (Debian's ``chromium`` and ``chromium-driver``, driven by
Selenium) and times: the page load until the first page of rows is drawn, a text search over
every row, and opening a row from its anchor.

:func:`chromium` is the browser the tests use too: it never touches the network (every host
name resolves to nothing and a dead local proxy catches the rest; background services off).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from frames_dspy.base.paths import HUB_DATASET, default_dataset
from frames_dspy.data.questions import dataset_fingerprint, load_frames
from frames_dspy.programs import CONDITIONS
from frames_dspy.results.html_report import write_html_report
from frames_dspy.results.records import SCHEMA_VERSION, QuestionRecord
from frames_dspy.results.run_folder import RunFolder, environment_record
from frames_dspy.results.tables import write_reports
from frames_dspy.run.evaluation import EvalConfig

HOW_TO_GET_CHROMIUM = (
    "needs Debian's headless browser and its driver: `apt-get install chromium "
    "chromium-driver` (or set FRAMES_CHROMIUM and FRAMES_CHROMEDRIVER to their paths), and "
    "Selenium (`pip install -e '.[dev]'`)"
)

_OFFLINE_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-extensions",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-server=127.0.0.1:9",
)


class BrowserMissing(RuntimeError):
    """Chromium, its driver or Selenium is not installed; the message says how to get them."""


@contextlib.contextmanager
def chromium(*, width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A headless Chromium driven by Selenium, offline; closed on exit.

    Raises:
        BrowserMissing: no browser, driver or Selenium (the message says how to install them).
    """
    browser = os.environ.get("FRAMES_CHROMIUM") or shutil.which("chromium")
    driver_path = os.environ.get("FRAMES_CHROMEDRIVER") or shutil.which("chromedriver")
    if not browser or not driver_path:
        raise BrowserMissing(
            f"no chromium or chromedriver on PATH: the report test {HOW_TO_GET_CHROMIUM}"
        )
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as err:
        raise BrowserMissing(f"selenium is not installed: {HOW_TO_GET_CHROMIUM}") from err
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in (*_OFFLINE_FLAGS, f"--window-size={width},{height}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def open_page(driver, path: str | Path, fragment: str = "") -> float:
    """Load a report from disk and wait until its rows are drawn; seconds it took."""
    driver.get("about:blank")  # a real load, even when only the fragment differs
    started = time.perf_counter()
    driver.get(Path(path).resolve().as_uri() + fragment)
    for _ in range(600):
        if driver.execute_script("return document.body.getAttribute('data-ready')") == "1":
            return time.perf_counter() - started
        time.sleep(0.05)
    raise TimeoutError(f"{path} never finished drawing its rows (no data-ready after 30 s)")


# --- a synthetic run of full size, through the real writers ------------------------------------

_WORDS = [
    "the",
    "of",
    "film",
    "river",
    "born",
    "capital",
    "album",
    "season",
    "league",
    "county",
    "novel",
    "war",
    "president",
    "team",
    "founded",
    "population",
    "tower",
    "bridge",
    "award",
    "election",
    "university",
    "emperor",
    "island",
    "museum",
    "species",
    "railway",
    "mountain",
    "treaty",
    "symphony",
    "painter",
    "cathedral",
    "dynasty",
    "orbit",
]


def _text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(low, high))).capitalize()


def _record(rng: random.Random, condition: str, example, spec) -> QuestionRecord:
    kind = spec.kind
    gold_ids = [f"{example.id}-{n}" for n in range(len(example.gold_urls))]
    rounds = spec.rounds if kind == "multihop" else (0 if kind == "naive" else 1)
    context: list[list[str]] = []
    ids: list[str] = []
    queries: list[list[str]] = []
    for _ in range(rounds):
        if kind == "oracle":
            ids = list(gold_ids)
        else:
            per = spec.n_docs * (spec.k if kind == "multihop" else 1)
            ids = ids + [f"a{rng.randrange(12_000)}" for _ in range(rng.randint(per // 3, per))]
            ids += [g for g in gold_ids if rng.random() < 0.3 and g not in ids]
        context.append(ids)
        if kind == "multihop":
            queries.append([example.question] + [_text(rng, 3, 9) for _ in range(spec.k - 1)])
        elif kind == "bm25":
            queries.append([example.question])
    correct = rng.random() < 0.4
    error = "TimeoutError('the LM call took over 60 s')" if rng.random() < 0.01 else None
    method = rng.choice(["exact", "name_match", "different_name", "no_quantity", "judge"])
    fields = {
        "condition": condition,
        "id": example.id,
        "question": example.question,
        "gold_answer": example.answer,
        "answer": example.answer if correct else _text(rng, 1, 40),
        "correct": None if error else correct,
        "judge_method": method,
        "judge_p_true": round(rng.random(), 3) if method == "judge" else None,
        "judge_explanation": _text(rng, 8, 40),
        "error": error,
        "error_kind": "TimeoutError" if error else None,
        "reasoning_types": list(example.reasoning_types),
        "n_gold": len(example.gold_urls),
        "gold_ids": gold_ids,
        "gold_titles": [_text(rng, 1, 4) for _ in gold_ids],
        "context_ids": context,
        "recall": [sum(g in r for g in gold_ids) / len(gold_ids) for r in context]
        if gold_ids
        else None,
        "queries": queries,
        "query_stats": None,
        "query_repetition_rate": None,
        "packing": None
        if kind == "naive"
        else {"budget_tokens": 2000, "used_tokens": 1990, "articles": len(ids), "truncated": 3},
        "answer_in_context": None if kind == "naive" else rng.choice([True, False, None]),
        "prompt_tokens": rng.randint(200, 9000),
        "completion_tokens": rng.randint(5, 200),
        "lm_calls": rounds + 1,
        "cached_calls": 0,
        "failed_calls": 0,
        "retries": 0,
        "metered_tokens": rng.randint(200, 9000),
        "judge_calls": int(method == "judge"),
        "judge_cached_calls": 0,
        "judge_prompt_tokens": 300 if method == "judge" else 0,
        "judge_completion_tokens": 40 if method == "judge" else 0,
        "seconds": round(rng.uniform(1, 120), 3),
    }
    return QuestionRecord(**fields)


def synthetic_run(
    out: str | Path, *, questions: int = 824, seed: int = 0, dataset: str | Path | None = None
) -> Path:
    """A run folder of ``questions`` real FRAMES questions x the six conditions, from
    ``dataset`` (a local questions file; default: the one under ``FRAMES_DATA_DIR``)."""
    out = Path(out)
    if (out / "predictions.jsonl").exists():
        raise ValueError(f"{out} already holds a run; name a new --out")
    dataset = dataset or default_dataset()
    if dataset == HUB_DATASET:
        raise ValueError("set FRAMES_DATA_DIR to the offline data (its frames/ questions)")
    examples = load_frames(dataset)[:questions]
    rng = random.Random(seed)
    run = RunFolder(out)
    config = EvalConfig(out=str(out))
    run.write_json(
        "config.json",
        {
            "record_schema": SCHEMA_VERSION,
            "settings": asdict(config),
            "selected_ids": [e.id for e in examples],
            "programs": {name: c.spec.to_dict() for name, c in CONDITIONS.items()},
            "dataset_sha256": dataset_fingerprint(examples),
            "corpus_sha256": "synthetic",
            **environment_record(),
        },
    )
    for name, condition in CONDITIONS.items():
        for example in examples:
            run.append(_record(rng, name, example, condition.spec))
    write_reports(out, model="synthetic", notes=["synthetic records (benchmarks.report_html)"])
    write_html_report(out)
    return out


def measure(folder: Path, *, screenshot: Path | None = None) -> dict[str, Any]:
    """Size of the page and, in headless Chromium, the times to load it, search it and open
    one row by its anchor."""
    page = folder / "report.html"
    with chromium() as driver:
        load = open_page(driver, page)
        drawn_ms = float(driver.execute_script("return document.body.dataset.readyMs"))
        search_ms = driver.execute_script(
            "const box = document.getElementById('f-search'); const t = performance.now();"
            "box.value = 'olympic'; box.dispatchEvent(new Event('input'));"
            "return performance.now() - t;"
        )
        matches = int(driver.find_element("id", "count").text)
        first = driver.execute_script(
            "const rows = JSON.parse(document.getElementById('report-data').textContent).rows;"
            "return rows[Math.floor(rows.length * 0.8)]"
        )
        anchor = f"#row={first['c']}/{first['i']}"
        reload = open_page(driver, page, anchor)
        opened = driver.execute_script(
            "return document.getElementById(arguments[0]) !== null",
            f"detail-{first['c']}/{first['i']}",
        )
        if screenshot is not None:
            driver.save_screenshot(str(screenshot))
    return {
        "rows": 6 * len(json.loads((folder / "config.json").read_text())["selected_ids"]),
        "report_bytes": page.stat().st_size,
        "predictions_bytes": (folder / "predictions.jsonl").stat().st_size,
        "load_seconds": round(load, 3),
        "rows_drawn_ms_after_navigation": round(drawn_ms),
        "search_ms": round(search_ms, 1),
        "search_matches": matches,
        "anchor_load_seconds": round(reload, 3),
        "anchor_opened_row": bool(opened),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report_html", description=__doc__)
    parser.add_argument("--questions", type=int, default=824)
    parser.add_argument("--out", default=None, help="keep the run folder here")
    parser.add_argument("--screenshot", default=None, help="save a PNG of the opened row")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.out) if args.out else Path(tmp) / "run"
        started = time.perf_counter()
        try:
            synthetic_run(folder, questions=args.questions)
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        written = time.perf_counter() - started
        try:
            result = measure(folder, screenshot=Path(args.screenshot) if args.screenshot else None)
        except BrowserMissing as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        result["write_seconds_all_reports"] = round(written, 2)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key:34} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
