"""optimize.final: the chosen program compiled, saved and tested; progress lines; the command."""

from __future__ import annotations

import json

import dspy
from opt_fake import FakeLM
from opt_helpers import (
    quiet_optuna,  # noqa: F401 (an autouse fixture)
    run_tiny,
)

from frames_dspy.metrics import Autorater
from frames_dspy.programs import build_program, load_program, save_program
from optimize.optimizers import trim_demos


def test_compiled_program_round_trips_through_program_json(tiny, tmp_path):
    examples, store, knowledge, retriever = tiny
    lm = FakeLM(knowledge)
    spec = {"kind": "multihop", "rounds": 2, "k": 2, "n_docs": 2, "planning": True}
    program = build_program(spec, retriever=retriever, store=store, context_tokens=400)
    with dspy.context(lm=lm):
        compiled = dspy.BootstrapFewShot(
            metric=Autorater(lm), max_bootstrapped_demos=1, max_labeled_demos=0
        ).compile(program, trainset=examples[:3])
    assert trim_demos(compiled, 200) > 0  # the answer demo's context was cut
    assert all(len(d["context"]) <= 202 for d in compiled.answer.demos)
    path = tmp_path / "program.json"
    save_program(compiled, str(path), extra={"optimize": {"trial": 7}})

    loaded, saved_spec, info = load_program(
        str(path), retriever=retriever, store=store, context_tokens=400
    )
    assert info["optimize"] == {"trial": 7} and saved_spec.rounds == 2
    assert loaded.dump_state() == compiled.dump_state()
    with dspy.context(lm=lm):
        for example in examples[3:6]:
            a, b = compiled(question=example.question), loaded(question=example.question)
            assert (a.answer, a.queries, a.context_ids) == (b.answer, b.queries, b.context_ids)


def test_bootstrap_random_search_runs_end_to_end(tiny, tmp_path):
    result, lines = run_tiny(
        tiny,
        tmp_path,
        trials=1,
        optimizer="bootstrap-rs",
        max_demos=1,
        optimizer_candidates=1,
        demo_chars=300,
    )
    info = result.chosen["compile"]
    assert info["optimizer"] == "bootstrap-rs" and info["dev_accuracy_after"] is not None
    assert info["compiled"].startswith(("kept", "discarded"))
    info = json.loads((tmp_path / "program.json").read_text())["frames_dspy_info"]
    assert info["optimize"]["compile"]["optimizer"] == "bootstrap-rs"
    assert any("bootstrap-rs" in line for line in lines)  # in the estimate and the log
    assert (tmp_path / "test_score.json").is_file()
