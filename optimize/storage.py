"""Where a study lives: an Optuna RDB storage (SQLite by default, PostgreSQL for many
machines), a seeded sampler, and a study that resumes only with the settings it was made with.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import optuna

from frames_dspy.base.redaction import redact, redact_settings

__all__ = ["redact", "open_storage", "make_sampler", "open_study"]


def open_storage(url: str, *, attempts: int = 4) -> optuna.storages.RDBStorage:
    """An Optuna RDB storage with heartbeats, retrying the table-creation race of new workers.

    Raises:
        ValueError: not a database URL, a missing driver, or a database that cannot be opened.
    """
    from sqlalchemy.exc import ArgumentError, DBAPIError

    if "://" not in url:
        raise ValueError(
            f"--storage {url!r} is not a database URL; use e.g. sqlite:///study.db or "
            "postgresql://user:password@host/dbname"
        )
    engine_kwargs = (
        {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {"pool_pre_ping": True}
    )
    for attempt in range(attempts):
        try:
            # Heartbeats let Optuna fail the trials of workers that died on other machines.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(
                    url, engine_kwargs=engine_kwargs, heartbeat_interval=30, grace_period=120
                )
        except ImportError as err:
            # Optuna hides the module's name in __cause__ ("No module named 'psycopg'").
            raise ValueError(
                f"--storage {redact(url)} needs a database driver that is not installed "
                f'({err.__cause__ or err}); for PostgreSQL: pip install -e ".[postgres]"'
            ) from err
        except ArgumentError as err:
            raise ValueError(
                f"--storage {redact(url)} cannot be used ({err}); use e.g. sqlite:///study.db "
                "or postgresql://user:password@host/dbname (with its driver installed)"
            ) from err
        except DBAPIError as err:  # "database is locked", two workers creating tables
            if attempt == attempts - 1:
                raise ValueError(f"cannot open --storage {redact(url)}: {err}") from err
            # Workers started together race to create the tables; the loser retries.
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


def make_sampler(name: str, seed: int, trials: int) -> optuna.samplers.BaseSampler:
    """A seeded ``tpe`` (multi-objective), ``nsga2`` or ``random`` sampler."""
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=max(4, min(20, trials)))
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    startup = min(10, max(3, trials // 2))
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup)


def open_study(
    storage_url: str,
    study_name: str,
    *,
    settings: dict[str, Any],
    sampler: optuna.samplers.BaseSampler,
    metric: str = "accuracy",
    defaults: dict[str, Any] | None = None,
) -> optuna.Study:
    """Create the two-objective study, or load it if it exists with the same settings.

    A setting the stored study lacks (one added since it was made) counts as its value in
    ``defaults``, the value the study's trials ran with.

    Raises:
        ValueError: the storage cannot be opened, or the stored study was made with other
            settings (another model, split, corpus...), whose trials are not comparable.
    """
    storage = open_storage(storage_url)
    study = optuna.create_study(
        storage=storage,
        study_name=study_name,
        directions=["maximize", "minimize"],
        sampler=sampler,
        load_if_exists=True,
    )
    previous = study.user_attrs.get("settings")
    if previous is not None:  # a study stored before settings were redacted compares alike
        previous = redact_settings(previous)
    if previous is None:
        study.set_user_attr("settings", settings)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names([metric, "tokens_per_q"])
    else:
        defaults = defaults or {}
        differences = [
            f"{key}: {previous.get(key, defaults.get(key))!r} -> {settings.get(key)!r}"
            for key in sorted(set(previous) | set(settings))
            if previous.get(key, defaults.get(key)) != settings.get(key)
        ]
        if differences:
            raise ValueError(
                f"study {study_name!r} in {redact(storage_url)} was made with other settings "
                f"({'; '.join(differences)}); rerun with the same settings, or choose another "
                "--study-name or --out"
            )
    return study
