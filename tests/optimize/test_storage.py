"""optimize.storage: database URLs, redacted passwords, seeded samplers, and a study that
resumes only with the settings it was made with.
"""

from __future__ import annotations

import optuna
import pytest
from opt_helpers import (
    quiet_optuna,  # noqa: F401 (an autouse fixture)
    run_tiny,
)

from optimize.space import SearchSpace
from optimize.storage import make_sampler, open_storage, open_study, redact


def test_storage_url_must_be_a_database_url(tiny, tmp_path):
    with pytest.raises(ValueError, match="not a database URL"):
        run_tiny(tiny, tmp_path, storage="study.db")


def test_a_study_made_with_other_settings_is_not_resumed(tiny, tmp_path):
    run_tiny(tiny, tmp_path, trials=1, test_limit=1)
    with pytest.raises(ValueError, match="other settings.*context_tokens"):
        run_tiny(tiny, tmp_path, trials=1, test_limit=1, context_tokens=500)


def test_redact_hides_only_the_password():
    assert (
        redact("postgresql://frames:hunter2@db.example:5432/optuna")
        == "postgresql://frames:***@db.example:5432/optuna"
    )
    assert (
        redact("postgresql://frames@db.example/optuna") == "postgresql://frames@db.example/optuna"
    )
    assert redact("sqlite:////runs/opt/study.db") == "sqlite:////runs/opt/study.db"
    assert redact("study.db") == "study.db"  # not a URL: shown as given


@pytest.mark.parametrize("url", ["study.db", "runs/opt/study.db", "sqlite:study.db"])
def test_a_path_is_not_a_storage_url(url):
    with pytest.raises(ValueError, match="is not a database URL") as info:
        open_storage(url)
    assert repr(url) in str(info.value) and "sqlite:///study.db" in str(info.value)


def test_an_unusable_storage_url_is_refused_without_its_password():
    with pytest.raises(ValueError, match="cannot be used") as info:
        open_storage("postgresql+nosuchdriver://frames:hunter2@localhost/optuna")
    message = str(info.value)
    assert "hunter2" not in message
    assert "postgresql+nosuchdriver://frames:***@localhost/optuna" in message
    assert "with its driver installed" in message


def test_open_study_resumes_with_the_same_settings_only(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    settings = {"model": "fake", "dev": 3, "space": {"rounds": [1, 5]}}
    study = open_study(url, "s", settings=settings, sampler=make_sampler("random", 0, 4))
    assert study.metric_names == ["accuracy", "tokens_per_q"]
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MINIMIZE"]
    study.add_trial(optuna.trial.create_trial(values=[0.5, 900.0]))

    again = open_study(url, "s", settings=dict(settings), sampler=make_sampler("random", 0, 4))
    assert len(again.trials) == 1 and again.user_attrs["settings"] == settings

    changed = {"model": "fake", "dev": 5, "space": {"rounds": [1, 5]}, "seed": 1}
    with pytest.raises(ValueError, match="was made with other settings") as info:
        open_study(url, "s", settings=changed, sampler=make_sampler("random", 0, 4))
    assert "(dev: 3 -> 5; seed: None -> 1)" in str(info.value)
    assert "--study-name or --out" in str(info.value)
    # Another name in the same storage is another study.
    other = open_study(url, "t", settings=changed, sampler=make_sampler("random", 0, 4))
    assert other.trials == []


@pytest.mark.parametrize(
    "name, kind",
    [
        ("tpe", optuna.samplers.TPESampler),
        ("nsga2", optuna.samplers.NSGAIISampler),
        ("random", optuna.samplers.RandomSampler),
    ],
)
def test_samplers_are_seeded(name, kind):
    def proposals(seed: int) -> list[dict]:
        study = optuna.create_study(
            directions=["maximize", "minimize"], sampler=make_sampler(name, seed, 10)
        )
        out = []
        for _ in range(4):
            trial = study.ask()
            out.append(SearchSpace().suggest(trial))
            study.tell(trial, [0.5, 100.0])
        return out

    assert isinstance(make_sampler(name, 0, 10), kind)
    assert proposals(7) == proposals(7)
    assert proposals(7) != proposals(8)


def test_a_setting_added_since_the_study_counts_as_its_default(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    open_study(url, "s", settings={"model": "m"}, sampler=make_sampler("random", 0, 4))
    newer = {"model": "m", "judge_max_tokens": 256}
    with pytest.raises(ValueError, match="judge_max_tokens: None -> 256"):
        open_study(url, "s", settings=newer, sampler=make_sampler("random", 0, 4))
    open_study(  # the old study ran with the default: it resumes
        url, "s", settings=newer, sampler=make_sampler("random", 0, 4),
        defaults={"judge_max_tokens": 256},
    )  # fmt: skip
    with pytest.raises(ValueError, match="judge_max_tokens: 256 -> 512"):
        open_study(
            url, "s", settings={**newer, "judge_max_tokens": 512},
            sampler=make_sampler("random", 0, 4), defaults={"judge_max_tokens": 256},
        )  # fmt: skip
