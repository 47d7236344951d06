"""The main command, timed with several engine set-ups side by side in one run.

Run ``FRAMES_DATA_DIR=... python -m benchmarks.main_command [--limit 2] [--json]``.

Each condition of ``python -m frames_dspy.evaluate`` runs on the first ``--limit`` questions
with the DSPy cache off, once per engine set-up, rotating which set-up goes first from one
condition to the next, so a change in machine load hits all alike:

* ``plain``: the embedded engine on llama.cpp's plain CPU kernels, without flash attention,
  drafts or saved prompt states (how the main command ran when issue 20 measured it);
* ``flash``: flash attention on, no drafts, no saved states (the engine's default after issue
  20's first round);
* ``drafts``: prompt-lookup drafts, no saved states (the engine's default after its second);
* ``now``: the engine's defaults (prompt-lookup drafts, saved prompt states, no flash
  attention).

Every set-up reuses cached prompt prefixes exactly (:mod:`frames_dspy.lm.engine.prompt_cache`; there
is no switch for it): a reused prefix ends at a multiple of 32 tokens, so ``plain`` reads up
to 31 tokens a call more than the engine issue 20 measured.

It prints wall seconds per condition and set-up, each set-up's ratio to ``plain``, how many
answers each gave alike with ``plain``, and the ones that differ (greedy decoding; flash
attention and batched drafts sum in another order, so a near-tie can tip). Run folders go to a
temporary folder.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from frames_dspy.lm import make_lm
from frames_dspy.lm.engine import llama_engine
from frames_dspy.programs import CONDITIONS
from frames_dspy.results.run_folder import load_records
from frames_dspy.run.evaluation import EvalConfig, run_evaluation

SETUPS = {
    "plain": {"flash_attn": False, "lookup_decoding": False, "prefix_states_mb": 0},
    "flash": {"flash_attn": True, "lookup_decoding": False, "prefix_states_mb": 0},
    "drafts": {"flash_attn": False, "lookup_decoding": True, "prefix_states_mb": 0},
    "now": {},
}


def run(limit: int, conditions: list[str], setups: list[str] | None = None) -> dict[str, Any]:
    """Time every condition under each set-up (``plain`` always); returns plain data."""
    chosen = {
        name: SETUPS[name] for name in SETUPS if name == "plain" or name in (setups or SETUPS)
    }
    lms = {name: make_lm("local", max_tokens=256, **kwargs) for name, kwargs in chosen.items()}
    for lm in lms.values():
        lm.engine.load()  # start-up (probe included) is not what a condition costs
    seconds: dict[str, dict[str, float]] = {name: {} for name in chosen}
    answers: dict[str, dict[str, dict[int, str]]] = {name: {} for name in chosen}
    with tempfile.TemporaryDirectory(prefix="bench-main-") as root:
        for i, condition in enumerate(conditions):
            names = list(chosen)
            order = names[i % len(names) :] + names[: i % len(names)]
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
    differ = [
        {
            "setup": name,
            "condition": c,
            "question": q,
            "plain": answers["plain"][c].get(q),
            "answer": a,
        }
        for name in chosen
        if name != "plain"
        for c in conditions
        for q, a in answers[name][c].items()
        if answers["plain"][c].get(q) != a
    ]
    same = {
        name: sum(len(row) for row in answers[name].values())
        - sum(1 for d in differ if d["setup"] == name)
        for name in chosen
    }
    total = {name: round(sum(row.values()), 1) for name, row in seconds.items()}
    return {
        "limit": limit,
        "conditions": conditions,
        "seconds": seconds,
        "total_seconds": total,
        "over_plain": {name: round(total[name] / total["plain"], 3) for name in chosen},
        "same_answers_as_plain": same,
        "answers_unlike_plain": differ,
        "answers": sum(len(v) for v in answers["now"].values()),
        "engines": engines,
    }


def render(report: dict[str, Any]) -> str:
    names = list(report["total_seconds"])
    head = "".join(f"{name + ' s':>10}" for name in names)
    ratios = "".join(f"{name + '/plain':>12}" for name in names if name != "plain")
    lines = [f"{'condition':<20}{head}{ratios}"]
    rows = [(c, {n: report["seconds"][n][c] for n in names}) for c in report["conditions"]]
    rows.append(("all", report["total_seconds"]))
    for label, row in rows:
        cells = "".join(f"{row[n]:>10.1f}" for n in names)
        cells += "".join(f"{row[n] / row['plain']:>12.3f}" for n in names if n != "plain")
        lines.append(f"{label:<20}{cells}")
    same = report["same_answers_as_plain"]
    alike = ", ".join(f"{n} {k}" for n, k in same.items() if n != "plain")
    lines.append(
        f"answers alike with plain (of {report['answers']}): {alike}; "
        f"{report['limit']} question(s) per condition, cache off"
    )
    for row in report.get("answers_unlike_plain", []):
        lines.append(
            f"  {row['setup']} {row['condition']} question {row['question']}: "
            f"{row['answer']!r} (plain: {row['plain']!r})"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=2, help="questions per condition")
    parser.add_argument("--conditions", default=",".join(CONDITIONS), help="comma-separated")
    parser.add_argument(
        "--setups", default=",".join(SETUPS), help=f"comma-separated, of {', '.join(SETUPS)}"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    unknown = set(args.setups.split(",")) - set(SETUPS)
    if unknown:
        parser.error(
            f"unknown set-up(s) {', '.join(sorted(unknown))}; choose from {', '.join(SETUPS)}"
        )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    report = run(args.limit, args.conditions.split(","), args.setups.split(","))
    print(json.dumps(report, indent=2) if args.json else render(report))


if __name__ == "__main__":
    main()
