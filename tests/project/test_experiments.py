"""Every published experiment's commands still parse with today's entry points, and the files
they name are in the repository: an experiment that no longer runs cannot be reproduced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from frames_dspy.commands import compile as opt_compile
from frames_dspy.commands import evaluate
from optimize.config import CompileConfig

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = sorted(p.parent for p in (REPO / "experiments").glob("*/experiment.json"))
PARSERS = {
    "frames_dspy.evaluate": evaluate.build_parser,
    "optimize.compile": opt_compile.build_parser,
}


def commands():
    for folder in EXPERIMENTS:
        data = json.loads((folder / "experiment.json").read_text(encoding="utf-8"))
        outs: list[str] = []  # the --out folders of the commands before this one
        for name, argv in data["commands"].items():
            yield pytest.param(argv, list(outs), id=f"{folder.name}:{name}")
            outs += [b for a, b in zip(argv, argv[1:], strict=False) if a == "--out"]


def test_there_are_experiments():
    assert len(EXPERIMENTS) >= 5


@pytest.mark.parametrize(("argv", "earlier_outs"), list(commands()))
def test_an_experiment_command_parses_and_names_files_that_exist(argv, earlier_outs, tmp_path):
    assert argv[:2] == ["python", "-m"] and argv[2] in PARSERS, argv[:3]
    args = [a.replace("{runs}", str(tmp_path)) for a in argv[3:]]
    parsed = PARSERS[argv[2]]().parse_args(args)  # exits 2 on a flag that is gone
    program = argv[argv.index("--program") + 1] if "--program" in argv else None
    if program and program.startswith("{runs}/"):
        # A program an earlier command of the experiment writes (a compile's program.json).
        assert any(program.startswith(out + "/") for out in earlier_outs), program
    elif program:
        assert (REPO / program).is_file(), f"{program} is not in the repository"
    if argv[2] == "optimize.compile":
        values = {k: v for k, v in vars(parsed).items() if k not in ("quiet", "verbose")}
        CompileConfig(**values).validate()
