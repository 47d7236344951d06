"""MLflow tracking, for those who track there (optional: ``pip install -e ".[mlflow]"``).

With ``--mlflow [URI]`` an evaluation becomes one MLflow run (its settings as params, its run
folder with ``report.html`` as artifacts) holding one nested run per condition (the program
spec as params, the Table-3 figures as metrics); a study of ``optimize.compile`` becomes one
MLflow run (its settings, its output files) with one nested run per Optuna trial (the trial's
parameters, objective values and measured figures). ``--mlflow-traces`` also records DSPy's
traces of every program and judge call through ``mlflow.dspy.autolog``.

The URI is any MLflow tracking URI (``sqlite:///...``, ``postgresql://...``, ``http://...``);
a folder path (``mlruns``, the default) means a local SQLite store in that folder
(``mlruns/mlflow.db``, artifacts under ``mlruns/artifacts``), since MLflow 3 no longer writes
its plain-file store by default. ``mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db``
shows it.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from frames_dspy.base.redaction import redact_settings
from frames_dspy.results.summary import ConditionSummary

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_STORE",
    "DEFAULT_EXPERIMENT",
    "TrackingUnavailable",
    "store_uri",
    "check_tracking",
    "enable_traces",
    "condition_metrics",
    "log_evaluation",
    "log_study",
]

#: Where ``--mlflow`` without a URI tracks: a SQLite store in this folder.
DEFAULT_STORE = "mlruns"
#: The MLflow experiment runs go to unless ``--mlflow-experiment`` names another.
DEFAULT_EXPERIMENT = "frames-dspy"

_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)
#: Metric names of a trial's two objective values.
_OBJECTIVES = ("objective", "tokens_per_question")
#: MLflow refuses longer parameter values.
_PARAM_CHARS = 6000


class TrackingUnavailable(ValueError):
    """``--mlflow`` was asked for but MLflow is not installed (the message says how)."""


def _mlflow():
    try:
        import mlflow
    except ImportError as err:
        raise TrackingUnavailable(
            "--mlflow needs MLflow: pip install -e '.[mlflow]' (or pip install mlflow)"
        ) from err
    return mlflow


def store_uri(value: str) -> tuple[str, str | None]:
    """The tracking URI for ``--mlflow VALUE`` and where a new experiment keeps artifacts.

    A URI with a scheme is used as it is (its server decides where artifacts go); a folder
    path becomes a SQLite store in that folder, its artifacts beside it.
    """
    if _SCHEME.match(value) and not re.match(r"^[a-z]:[\\/]", value, re.IGNORECASE):
        return value, None
    folder = Path(value).expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'mlflow.db'}", (folder / "artifacts").as_uri()


def _experiment(settings: Any) -> str:
    """Point MLflow at the settings' store and experiment; the experiment's id."""
    mlflow = _mlflow()
    uri, artifacts = store_uri(settings.mlflow)
    mlflow.set_tracking_uri(uri)
    name = settings.mlflow_experiment or DEFAULT_EXPERIMENT
    found = mlflow.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    return mlflow.create_experiment(name, artifact_location=artifacts)


def check_tracking(settings: Any) -> None:
    """Fail before any model loads when ``--mlflow`` is set but MLflow is missing.

    Raises:
        TrackingUnavailable: MLflow is not installed.
    """
    if settings.mlflow or settings.mlflow_traces:
        _mlflow()


def enable_traces(settings: Any) -> None:
    """Record DSPy's traces (every module, LM and adapter call) in the settings' store (set:
    resolved settings name :data:`DEFAULT_STORE` when ``--mlflow-traces`` came alone)."""
    mlflow = _mlflow()
    mlflow.set_experiment(experiment_id=_experiment(settings))
    mlflow.dspy.autolog()
    logger.info("MLflow traces of DSPy calls go to %s", settings.mlflow)


def _flat(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            _flat(f"{prefix}.{key}" if prefix else str(key), inner, out)
    else:
        out[prefix] = str(value)[:_PARAM_CHARS]


def _params(**groups: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for prefix, value in groups.items():
        _flat(prefix, value, out)
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return None if math.isnan(value) else float(value)


#: Figures of a condition's summary logged as metrics, under their names (as in ``summary.json``).
_FIGURES = (
    "n", "correct", "accuracy", "accuracy_judged", "program_errors", "program_error_rate",
    "judge_errors", "judge_calls", "rule_verdicts", "lm_verdicts", "lm_calls", "cached_calls",
    "retries", "recall_n", "answer_in_context", "answer_in_context_n",
    "wrong_with_answer_in_context", "tokens_per_question", "reported_tokens_per_question",
    "lm_calls_per_question", "cost_usd",
    "query_repetition_rate", "near_repeat_rate", "seconds_per_question", "duplicates_ignored",
    "agent_n", "steps_per_question", "searches_per_question", "articles_read_per_question",
    "malformed_calls_per_question", "gold_searched", "gold_read", "gold_used",
)  # fmt: skip


def condition_metrics(row: ConditionSummary) -> dict[str, float]:
    """A condition's Table-3 figures as MLflow metrics (None and NaN ones left out)."""
    metrics = {name: _number(getattr(row, name)) for name in _FIGURES}
    low, high = row.ci95
    metrics["ci95_low"], metrics["ci95_high"] = _number(low), _number(high)
    recall = row.recall_by_round
    if recall:
        metrics["recall_final"] = _number(recall[-1])
        metrics["recall_round1"] = _number(recall[0])
    return {k: v for k, v in metrics.items() if v is not None}


def log_evaluation(
    run_dir: str | Path,
    summary: Mapping[str, ConditionSummary],
    config: Mapping[str, Any],
    *,
    settings: Any = None,
) -> str:
    """Log a finished evaluation: one MLflow run for the run folder, one nested per condition.

    Parameters are logged without credentials (:func:`frames_dspy.base.redaction.redact_settings`).

    Args:
        run_dir: The run folder, logged whole as artifacts (``report.html`` included).
        summary: Per-condition summaries (``summary.json`` holds them).
        config: The run's ``config.json``.
        settings: The run's settings, which name the store and experiment (default: the
            config's ``settings``; a tracking URI with a password needs the real ones, as
            ``config.json`` holds it redacted).

    Returns:
        The id of the MLflow run of the whole evaluation.
    """
    mlflow = _mlflow()
    run_dir = Path(run_dir)
    config = redact_settings(config)
    settings = settings if settings is not None else _Settings(config.get("settings") or {})
    experiment = _experiment(settings)
    tags = {
        "frames.run_folder": str(run_dir.resolve()),
        "frames.kind": "evaluate",
        **{f"frames.{k}": str(config.get(k)) for k in ("dataset_sha256", "corpus_sha256")},
    }
    with mlflow.start_run(run_name=run_dir.name, experiment_id=experiment, tags=tags) as parent:
        mlflow.log_params(_params(settings=config.get("settings") or {}))
        for condition, row in summary.items():
            spec = (config.get("programs") or {}).get(condition) or {}
            with mlflow.start_run(
                run_name=condition,
                experiment_id=experiment,
                nested=True,
                tags={**tags, "frames.kind": "condition", "frames.condition": condition},
            ):
                mlflow.log_params(_params(condition=condition, program=spec))
                mlflow.log_metrics(condition_metrics(row))
                for step, value in enumerate(row.recall_by_round, start=1):
                    if (number := _number(value)) is not None:
                        mlflow.log_metric("recall_by_round", number, step=step)
        mlflow.log_artifacts(str(run_dir), artifact_path="run_folder")
    logger.info("logged %s to MLflow run %s", run_dir, parent.info.run_id)
    return parent.info.run_id


def log_study(
    trials: Iterable[Any],
    out: str | Path,
    settings: Any,
    *,
    chosen: int | None = None,
) -> str:
    """Log a study: one MLflow run for its output folder, one nested per complete trial.

    Args:
        trials: Optuna ``FrozenTrial``s (the complete ones are logged).
        out: The study's output folder; its files (not ``study.db`` or sub-folders; the
            test run logs itself) are the artifacts.
        settings: The ``CompileConfig``.
        chosen: The number of the trial picked from the front (tagged).

    Returns:
        The id of the MLflow run of the study.
    """
    mlflow = _mlflow()
    out = Path(out)
    experiment = _experiment(settings)
    tags = {"frames.kind": "study", "frames.run_folder": str(out.resolve())}
    name = f"study {settings.study_name or out.name}"
    with mlflow.start_run(run_name=name, experiment_id=experiment, tags=tags) as parent:
        logged = {k: v for k, v in vars(settings).items() if k != "storage"}
        mlflow.log_params(_params(settings=redact_settings(logged)))
        for trial in trials:
            if trial.state.name != "COMPLETE":
                continue
            attrs = trial.user_attrs
            with mlflow.start_run(
                run_name=f"trial {trial.number}",
                experiment_id=experiment,
                nested=True,
                tags={
                    **tags,
                    "frames.kind": "trial",
                    "frames.trial": str(trial.number),
                    "frames.label": str(attrs.get("label", "")),
                    "frames.chosen": str(trial.number == chosen).lower(),
                },
            ):
                mlflow.log_params(_params(trial=trial.params))
                # The study's two objectives (the settings' ``objective`` param names the first).
                metrics = dict(zip(_OBJECTIVES, trial.values or (), strict=False))
                metrics |= {k: v for k, v in attrs.items() if _number(v) is not None}
                mlflow.log_metrics({k: float(v) for k, v in metrics.items()})
        for path in sorted(out.iterdir()):  # not the study, nor the lock file
            if path.is_file() and path.name != "study.db" and not path.name.startswith("."):
                mlflow.log_artifact(str(path))
    logger.info("logged study %s to MLflow run %s", out, parent.info.run_id)
    return parent.info.run_id


class _Settings:
    """The tracking fields of a run's recorded settings, read like a settings object."""

    def __init__(self, settings: Mapping[str, Any]):
        self.mlflow = settings.get("mlflow") or DEFAULT_STORE
        self.mlflow_experiment = settings.get("mlflow_experiment") or DEFAULT_EXPERIMENT
        self.mlflow_traces = bool(settings.get("mlflow_traces"))
