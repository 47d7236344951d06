"""The README's main command, timed with two engine set-ups side by side in one run.

Run ``FRAMES_DATA_DIR=... python -m benchmarks.main_command [--limit 2] [--json]``.

Each condition of ``python -m frames_dspy.evaluate`` runs on the first ``--limit`` questions
with the DSPy cache off, once per engine set-up, alternating which set-up goes first from one
condition to the next, so a change in machine load hits both alike:

* ``plain``: the embedded engine on llama.cpp's plain CPU kernels, without flash attention
  (how the main command ran before the engine gained it);
* ``now``: the engine's defaults.

It prints wall seconds per condition and set-up, the ratio, and how many answers the two
set-ups gave alike (greedy decoding; flash attention sums in another order, so a near-tie can
tip). Run folders go to a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from frames_dspy.evaluation import EvalConfig, run_evaluation
from frames_dspy.lm import llama_engine, make_lm
from frames_dspy.programs import CONDITIONS
from frames_dspy.run_folder import load_records

SETUPS = {"plain": {"flash_attn": False}, "now": {}}


def run(limit: int, conditions: list[str]) -> dict[str, Any]:
    """Time every condition under both set-ups; returns the report as plain data."""
    lms = {name: make_lm("local", max_tokens=256, **kwargs) for name, kwargs in SETUPS.items()}
    for lm in lms.values():
        lm.engine.load()  # start-up (probe included) is not what a condition costs
    seconds: dict[str, dict[str, float]] = {name: {} for name in SETUPS}
    answers: dict[str, dict[str, dict[int, str]]] = {name: {} for name in SETUPS}
    with tempfile.TemporaryDirectory(prefix="bench-main-") as root:
        for i, condition in enumerate(conditions):
            order = list(SETUPS) if i % 2 == 0 else list(SETUPS)[::-1]
            for name in order:
                out = Path(root) / f"{name}-{condition}"
                config = EvalConfig(conditions=[condition], limit=limit, cache="off", out=str(out))
                started = time.perf_counter()
                run_evaluation(config, lm=lms[name], progress=False)
                seconds[name][condition] = round(time.perf_counter() - started, 1)
                answers[name][condition] = {
                    r.id: r.answer for r in load_records(out) if r.condition == condition
                }
                logging.info("%s %s: %.1f s", condition, name, seconds[name][condition])
        engines = {name: lm.engine.record() for name, lm in lms.items()}
    llama_engine._reset_loaded_models()
    same = sum(
        answers["plain"][c].get(q) == a for c in conditions for q, a in answers["now"][c].items()
    )
    total = {name: round(sum(row.values()), 1) for name, row in seconds.items()}
    return {
        "limit": limit,
        "conditions": conditions,
        "seconds": seconds,
        "total_seconds": total,
        "now_over_plain": round(total["now"] / total["plain"], 3),
        "same_answers": same,
        "answers": sum(len(v) for v in answers["now"].values()),
        "engines": engines,
    }


def render(report: dict[str, Any]) -> str:
    lines = [f"{'condition':<20} {'plain s':>9} {'now s':>9} {'now/plain':>10}"]
    for condition in report["conditions"]:
        plain, now = report["seconds"]["plain"][condition], report["seconds"]["now"][condition]
        lines.append(f"{condition:<20} {plain:>9.1f} {now:>9.1f} {now / plain:>10.3f}")
    total = report["total_seconds"]
    lines.append(
        f"{'all':<20} {total['plain']:>9.1f} {total['now']:>9.1f} {report['now_over_plain']:>10.3f}"
    )
    lines.append(
        f"{report['same_answers']} of {report['answers']} answers alike; "
        f"{report['limit']} question(s) per condition, cache off"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=2, help="questions per condition")
    parser.add_argument("--conditions", default=",".join(CONDITIONS), help="comma-separated")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    report = run(args.limit, args.conditions.split(","))
    print(json.dumps(report, indent=2) if args.json else render(report))


if __name__ == "__main__":
    main()
