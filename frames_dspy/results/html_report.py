"""A run folder as one self-contained HTML page: ``report.html``.

The page opens from disk with no server and no network: its CSS and script are inlined, the
plots are PNG data URIs and the records are one JSON blob the script renders a page of rows at
a time, so 824 questions x 6 conditions stay fast. It shows the run's header (models, judge,
cache, settings, data hashes), the Table-3 cells of :func:`frames_dspy.results.tables.table3_cells`
and the search cells of :func:`~frames_dspy.results.tables.search_cells`, the plots, and one
row per question x condition (an agent's row with its trajectory, step by step) with filters
and a link anchor per row
(``#row=<condition>/<id>``, or ``#row=B:<condition>/<id>`` for a second run). Given a second
run, the flipped questions of each condition pair come first, under the intervals of
:func:`frames_dspy.results.comparison.compare_runs` (the statistics are computed there, not here).
"""

from __future__ import annotations

import base64
import html
import json
import logging
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from frames_dspy.base.files import atomic_write_text
from frames_dspy.judge.autorater import JUDGE_METHODS, is_rule_method
from frames_dspy.programs.trajectory import MALFORMED
from frames_dspy.results.comparison import CompareConfig, compare_runs, comparison_dict, load_run
from frames_dspy.results.records import QuestionRecord
from frames_dspy.results.summary import summarize
from frames_dspy.results.tables import (
    CONDITION_ORDER,
    SEARCH_NOTE,
    search_cells,
    table3_cells,
)

logger = logging.getLogger(__name__)

__all__ = [
    "OUTCOMES",
    "PLOTS",
    "outcome",
    "verdict_source",
    "gold_rounds",
    "gold_search_steps",
    "trajectory_rows",
    "report_data",
    "render_report",
    "write_html_report",
]

#: What became of one question x condition, in the order the filter lists them.
OUTCOMES = ("correct", "wrong", "failed", "judge error")

#: The run folder's plots the page embeds, with their captions.
PLOTS = {
    "accuracy_by_reasoning_type.png": "Accuracy by reasoning type",
    "recall_by_round.png": "Gold-article recall after each round",
}

#: The settings the header names first; the rest are listed below them.
_HEADLINE = ("model", "judge_model", "cache", "api_base", "judge_api_base", "context_tokens")


def outcome(record: QuestionRecord) -> str:
    """``failed`` (the program raised), ``judge error``, ``correct`` or ``wrong``."""
    if record.error:
        return "failed"
    if record.judge_failed:
        return "judge error"
    return "correct" if record.is_correct else "wrong"


def verdict_source(method: str | None) -> str:
    """``rule`` (the autorater's rules decided), ``lm`` (its LM judge) or ``none``."""
    if is_rule_method(method):
        return "rule"
    return "lm" if method in JUDGE_METHODS else "none"


def gold_rounds(record: QuestionRecord) -> list[int | None]:
    """For each gold article of the record, the first round (1-based) it was in context, or
    None when it never was."""
    found: list[int | None] = []
    for gold in record.gold_ids:
        first = next((i for i, ids in enumerate(record.context_ids, start=1) if gold in ids), None)
        found.append(first)
    return found


def gold_search_steps(record: QuestionRecord) -> list[int | None] | None:
    """For each gold article, the first step (1-based) whose search showed it, or None; None
    for a record without a trajectory."""
    if record.trajectory is None:
        return None
    shown: list[int | None] = []
    for gold in record.gold_ids:
        steps = enumerate(record.trajectory, start=1)
        shown.append(next((n for n, s in steps if s.is_search and gold in s.article_ids), None))
    return shown


def trajectory_rows(record: QuestionRecord) -> list[list[Any]] | None:
    """The agent's steps for the page: action, argument, outcome, what came back, tokens;
    None for a record without a trajectory."""
    if record.trajectory is None:
        return None
    return [[s.action, s.argument, s.outcome, s.observation, s.tokens] for s in record.trajectory]


def _questions_and_rows(
    records: Iterable[QuestionRecord], run: int, questions: dict[str, list]
) -> list[dict[str, Any]]:
    """Compact rows for the page; a question's own text is stored once in ``questions``."""
    rows = []
    for r in records:
        qid = str(r.id)
        if qid not in questions:
            titles = r.gold_titles or r.gold_ids
            questions[qid] = [
                r.question,
                r.gold_answer,
                list(r.reasoning_types),
                r.n_gold,
                list(titles),
            ]
        packing = r.packing or {}
        packed = [packing.get(k) for k in ("articles", "truncated", "used_tokens")]
        rows.append(
            {
                "run": run,
                "c": r.condition,
                "i": qid,
                "a": r.answer or "",
                "o": outcome(r),
                "m": r.judge_method,
                "src": verdict_source(r.judge_method),
                "x": r.judge_explanation or "",
                "p": r.judge_p_true,
                "e": r.error,
                "g": gold_rounds(r),
                "gi": list(r.gold_ids),
                "rc": r.recall,
                "q": r.queries,
                "aic": r.answer_in_context,
                # No article ever reached the answer step (naive, or a failure before retrieval).
                "nc": not r.context_ids and not packing,
                "t": r.tokens,
                "rp": r.reported_tokens,
                "jt": r.judge_tokens,
                "s": r.seconds,
                "lc": r.lm_calls,
                "cc": r.cached_calls,
                "rt": r.retries,
                "pk": packed if packing else None,
                "nr": r.near_repeat_rate,
                "tj": trajectory_rows(r),
                "sr": r.stop_reason,
                "gs": gold_search_steps(r),
            }
        )
    return rows


def _id_key(qid: str) -> tuple[int, int | str]:
    return (0, int(qid)) if qid.isdigit() else (1, qid)


def _plots(run_dir: Path) -> list[dict[str, str]]:
    out = []
    for name, caption in PLOTS.items():
        path = run_dir / name
        if path.is_file():
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            out.append({"name": name, "caption": caption, "src": f"data:image/png;base64,{data}"})
    return out


def _notes(run_dir: Path) -> list[str]:
    """How the run was made, as the lines heading its ``table.md`` say (self-judging, an
    early stop, an interruption)."""
    path = run_dir / "table.md"
    if not path.is_file():
        return []
    notes = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("> "):
            break
        notes.append(line[2:])
    return notes


def _run_part(
    run_dir: Path, config: dict[str, Any], records: list[QuestionRecord]
) -> dict[str, Any]:
    summary = summarize(records)
    settings = config.get("settings") or {}
    measured = not settings.get("retrieval_only", False)
    header, cells = table3_cells(
        summary, model=settings.get("model", ""), accuracy_measured=measured
    )
    search_header, search_rows = search_cells(summary, accuracy_measured=measured)
    return {
        "path": str(run_dir),
        "config": config,
        "summary": summary,
        "table": {"header": header, "rows": cells},
        "search": {"header": search_header, "rows": search_rows},
        "plots": _plots(run_dir),
        "notes": _notes(run_dir),
    }


def _run_name(folder: Path) -> str:
    """The folder as a reader knows it: its parent and name (``runs/20261206-101500``)."""
    folder = folder.resolve()
    return f"{folder.parent.name}/{folder.name}" if folder.parent.name else folder.name


def _describe(part: dict[str, Any]) -> str:
    """What a run ran: its model, conditions and questions."""
    config = part["config"]
    model = (config.get("settings") or {}).get("model") or "?"
    conditions = len(part["summary"])
    questions = len(config.get("selected_ids") or []) or max(
        (row.n for row in part["summary"].values()), default=0
    )
    return f"{model}: {conditions} condition(s) x {questions} question(s)"


def report_data(
    run_dir: str | Path,
    run_b: str | Path | None = None,
    *,
    compare: CompareConfig | None = None,
) -> dict[str, Any]:
    """Everything the page shows, as JSON-ready data; each run's ``summary`` is its
    :class:`~frames_dspy.results.summary.ConditionSummary` rows, which the page shows as cells.

    Args:
        run_dir: The run folder.
        run_b: A second run folder: its rows join the table (as run B) and the flipped
            questions are compared.
        compare: How to compare the two (conditions, bootstrap resamples, seed); default
            every shared condition, as ``python -m frames_dspy.compare`` does.

    Raises:
        frames_dspy.results.comparison.CompareError: a folder is not a run folder with predictions
            (the message says why), or the two runs cannot be compared.
    """
    folders = [Path(run_dir)] + ([Path(run_b)] if run_b is not None else [])
    questions: dict[str, list] = {}
    runs, rows = [], []
    for index, folder in enumerate(folders):
        run = load_run(folder)  # a question recorded twice keeps its last record
        records = [r for by_id in run.records.values() for r in by_id.values()]
        runs.append(_run_part(folder, run.config, records))
        rows += _questions_and_rows(records, index, questions)
    order = {name: n for n, name in enumerate(CONDITION_ORDER)}
    rows.sort(key=lambda r: (r["run"], order.get(r["c"], len(order)), r["c"], _id_key(r["i"])))
    comparison = None
    if run_b is not None:
        config = compare or CompareConfig(str(folders[0]), str(folders[1]))
        comparison = comparison_dict(compare_runs(config))
    return {
        "title": " vs ".join(_run_name(f) for f in folders) + " — frames-dspy report",
        "subtitle": "; ".join(_describe(part) for part in runs),
        "runs": runs,
        "questions": questions,
        "rows": rows,
        "comparison": comparison,
        "outcomes": list(OUTCOMES),
    }


def _esc(value: Any) -> str:
    return html.escape("—" if value is None else str(value))


def _kv_table(items: Sequence[tuple[str, Any]]) -> str:
    rows = "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(_cell(v))}</td></tr>" for k, v in items)
    return f'<table class="kv">{rows}</table>'


def _header_html(part: dict[str, Any], label: str) -> str:
    config = part["config"]
    settings = config.get("settings") or {}
    headline = [(k, settings.get(k)) for k in _HEADLINE if k in settings]
    data = [
        (k, config.get(k))
        for k in ("dataset_sha256", "corpus_sha256", "corpus_articles", "program_sha256")
        if k in config
    ]
    env_keys = ("started", "python", "packages")
    env = [(k, config[k]) for k in env_keys if config.get(k) not in (None, {})]
    env.append(("questions selected", len(config.get("selected_ids") or [])))
    rest = [(k, v) for k, v in settings.items() if k not in _HEADLINE]
    programs = list((config.get("programs") or {}).items())
    notes = "".join(
        f'<p class="{"warning" if n.split(" ", 1)[0].isupper() else "note"}">{_esc(n)}</p>'
        for n in part.get("notes", [])
    )
    return (
        f'<section class="run-header"><h2>{_esc(label)}: <code>{_esc(part["path"])}</code></h2>'
        f"{notes}"
        f'<div class="cols"><div><h3>Models and cache</h3>{_kv_table(headline)}</div>'
        f"<div><h3>Data</h3>{_kv_table(data)}</div><div><h3>Environment</h3>{_kv_table(env)}"
        f"</div></div>{_engines_html(config.get('engines') or {})}"
        f"<details><summary>Every setting ({len(rest)}) and program spec</summary>"
        f"{_kv_table(rest)}{_kv_table(programs)}</details></section>"
    )


#: Engine record fields too long for a table cell; they go in a details element below it.
_ENGINE_DETAILS = ("llama_cpp_system_info",)


def _engines_html(engines: dict[str, Any]) -> str:
    """How each embedded model ran (``config.json``'s ``engines``) as a small table: one
    column per role (program, judge), one row per setting; empty for API models."""
    if not engines:
        return ""
    roles = list(engines)
    keys = list(dict.fromkeys(k for r in roles for k in engines[r] if k not in _ENGINE_DETAILS))
    head = "".join(f"<th>{_esc(role)}</th>" for role in roles)
    body = "".join(
        f"<tr><th>{_esc(key)}</th>"
        + "".join(f"<td>{_esc(_cell(engines[r].get(key)))}</td>" for r in roles)
        + "</tr>"
        for key in keys
    )
    details = "".join(
        f"<details><summary>{_esc(key)} ({_esc(role)})</summary><pre>{_esc(value)}</pre></details>"
        for role in roles
        for key in _ENGINE_DETAILS
        if (value := engines[role].get(key))
    )
    return (
        '<div class="engines"><h3>Embedded engine</h3><table class="kv"><thead><tr><th></th>'
        f"{head}</tr></thead><tbody>{body}</tbody></table>{details}</div>"
    )


def _cell(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, dict | list) else value


def _cells_html(table: dict[str, Any], css: str) -> str:
    header = "".join(f"<th>{_esc(h)}</th>" for h in table["header"])
    body = "".join(
        "<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in cells) + "</tr>" for cells in table["rows"]
    )
    return f'<table class="{css}"><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>'


def _table_html(part: dict[str, Any]) -> str:
    search = part.get("search") or {}
    searched = (
        f"<h3>How the LM searched</h3>{_cells_html(search, 'table3 search')}"
        f'<p class="note">{_esc(SEARCH_NOTE)}</p>'
        if search.get("rows")
        else ""
    )
    plots = "".join(
        f'<figure><img alt="{_esc(p["caption"])}" src="{p["src"]}">'
        f"<figcaption>{_esc(p['caption'])}</figcaption></figure>"
        for p in part["plots"]
    )
    return f'{_cells_html(part["table"], "table3")}{searched}<div class="plots">{plots}</div>'


def _asset(name: str) -> str:
    return resources.files("frames_dspy.results").joinpath("assets", name).read_text("utf-8")


def render_report(data: dict[str, Any]) -> str:
    """The page for :func:`report_data`'s data: static parts as HTML, rows from the blob."""
    labels = ["Run A", "Run B"] if len(data["runs"]) > 1 else ["Run"]
    static = "".join(
        _header_html(part, label) + f"<section><h2>{_esc(label)}: Table 3</h2>"
        f"{_table_html(part)}</section>"
        for part, label in zip(data["runs"], labels, strict=True)
    )
    # A "<" in the JSON ("</script>", "<!--") could end or confuse the script element; the
    # escape \u003c is the same JSON string.
    blob = json.dumps(data_for_script(data), ensure_ascii=False, default=str)
    blob = blob.replace("<", "\\u003c")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_esc(data['title'])}</title>"
        f"<style>{_asset('report.css')}</style></head><body>"
        f'<h1>{_esc(data["title"])}</h1><p class="subtitle">{_esc(data["subtitle"])}</p>'
        # Two runs: the comparison's intervals and the flipped questions come first.
        f'<section id="comparison"></section>{static}'
        '<section id="rows-section"><h2>Every question x condition</h2>'
        '<div id="filters"></div><div id="pager"></div><div id="rows"></div></section>'
        f'<script type="application/json" id="report-data">{blob}</script>'
        f"<script>{_asset('report.js')}</script></body></html>\n"
    )


def data_for_script(data: dict[str, Any]) -> dict[str, Any]:
    """What the page's script needs: rows, questions, the comparison (no plots, no config)."""
    return {
        "questions": data["questions"],
        "rows": data["rows"],
        "comparison": data["comparison"],
        "outcomes": data["outcomes"],
        "malformed": sorted(MALFORMED),
        "runs": [part["path"] for part in data["runs"]],
    }


def write_html_report(
    run_dir: str | Path,
    run_b: str | Path | None = None,
    *,
    out: str | Path | None = None,
    compare: CompareConfig | None = None,
) -> Path:
    """Write the page (default ``<run_dir>/report.html``) and return its path."""
    path = Path(out) if out is not None else Path(run_dir) / "report.html"
    page = render_report(report_data(run_dir, run_b, compare=compare))
    atomic_write_text(path, page)
    logger.info("wrote %s (%.1f MB)", path, len(page.encode("utf-8")) / 1e6)
    return path
