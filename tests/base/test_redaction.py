"""frames_dspy.base.redaction: no password, token or API key in a run's files, logs or MLflow.

Each kind of secret is redacted on its own (user:password in a URL, a key in a query string,
LiteLLM's key settings, a URL inside a command or a log line), and a whole run made with a
password in every URL it takes leaves none in any file of its folder or its MLflow store.
"""

from __future__ import annotations

import json
import logging
import sqlite3

import mlflow
import pytest

from frames_dspy.base.redaction import (
    MASK,
    RedactingFilter,
    is_secret_name,
    redact,
    redact_settings,
    redact_text,
)
from frames_dspy.run.evaluation import run_evaluation
from frames_dspy.run.tracking import store_uri
from tests.commands.test_evaluate import call_main, config_for, judge, program_lm

SECRETS = ("s3cretA", "s3cretB", "s3cretC", "s3cretD", "s3cretE", "sk-s3cretF")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://frames:hunter2@db:5432/optuna", "postgresql://frames:***@db:5432/optuna"),
        ("https://bob:pa:ss@mlflow.example/", "https://bob:***@mlflow.example/"),
        ("http://u:p@ss@127.0.0.1:8000/v1", "http://u:***@127.0.0.1:8000/v1"),
        ("https://h/v1?key=abc&model=m", "https://h/v1?key=***&model=m"),
        ("https://h/w/api.php?api_key=a&x-api-key=b&sig=c&token=d", None),
        ("https://h/x?access_token=a#part", "https://h/x?access_token=***#part"),
        ("postgresql://frames@db/optuna", "postgresql://frames@db/optuna"),
        ("sqlite:////runs/opt/study.db", "sqlite:////runs/opt/study.db"),
        ("runs/opt/study.db", "runs/opt/study.db"),
        ("https://h/v1?max_tokens=5", "https://h/v1?max_tokens=5"),
    ],
)
def test_a_url_keeps_everything_but_its_secrets(url, shown):
    result = redact(url)
    if shown is not None:
        assert result == shown
    assert not any(word in result for word in ("hunter2", "pa:ss", "=abc", "=a&", "=d"))


def test_secret_names_are_told_from_token_counts():
    for name in ("api_key", "OPENAI_API_KEY", "x-api-key", "key", "token", "access_token",
                 "aws_secret_access_key", "vertex_credentials", "password", "client_secret",
                 "Authorization", "sig"):  # fmt: skip
        assert is_secret_name(name), name
    for name in ("max_tokens", "context_tokens", "judge_max_tokens", "tokens_per_question",
                 "monkey", "keywords", "model", "api_base"):  # fmt: skip
        assert not is_secret_name(name), name


def test_settings_lose_litellm_keys_and_url_passwords_but_nothing_else():
    settings = {
        "model": "openai/gpt-4o-mini",
        "api_key": "sk-abc",
        "max_tokens": 256,
        "api_base": "http://u:pw@h/v1",
        "lm_kwargs": {"aws_secret_access_key": "AKIA", "vertex_credentials": "{...}"},
        "empty_key": None,
        "urls": ["https://h/?token=t", "plain"],
    }
    clean = redact_settings(settings)
    assert clean == {
        "model": "openai/gpt-4o-mini",
        "api_key": MASK,
        "max_tokens": 256,
        "api_base": "http://u:***@h/v1",
        "lm_kwargs": {"aws_secret_access_key": MASK, "vertex_credentials": MASK},
        "empty_key": None,  # no key given shows as none
        "urls": ["https://h/?token=***", "plain"],
    }
    assert settings["api_key"] == "sk-abc"  # the input is not changed


def test_commands_and_log_lines_lose_their_secrets(caplog):
    command = "python -m x --api-base 'http://u:pw1@h:8/v1' --mlflow https://m:pw2@mlf/?key=k3"
    assert redact_text(command) == (
        "python -m x --api-base 'http://u:***@h:8/v1' --mlflow https://m:***@mlf/?key=***"
    )
    logger = logging.getLogger("test.redaction")
    handler = logging.Handler()
    seen = []
    handler.emit = lambda record: seen.append(record.getMessage())
    handler.addFilter(RedactingFilter())
    logger.addHandler(handler)
    try:
        logger.warning("nothing answers at %s", "http://u:pw1@h:8/v1")
    finally:
        logger.removeHandler(handler)
    assert seen == ["nothing answers at http://u:***@h:8/v1"]


def _files_holding(folder, secrets) -> dict[str, list[str]]:
    found = {}
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            hits = [s for s in secrets if s.encode() in data]
            if hits:
                found[str(path)] = hits
    return found


def test_a_run_with_a_password_in_every_url_writes_none(data, tmp_path):
    out, store = tmp_path / "run", tmp_path / "mlruns"
    lm = program_lm()
    lm.kwargs["api_key"] = "sk-s3cretF"  # LiteLLM's key setting on the LM itself
    config = config_for(
        data,
        out,
        conditions=["naive", "bm25-2"],
        api_base="http://frames:s3cretA@127.0.0.1:9/v1",
        judge_api_base="https://judge:s3cretB@judge.example/v1?api_key=s3cretC",
        wiki_api="https://wiki:s3cretD@wiki.example/w/api.php?key=s3cretE",
        mlflow=str(store),
    )
    try:
        run_evaluation(config, lm=lm, judge_lm=judge(), progress=False)
        mlflow.set_tracking_uri(store_uri(str(store))[0])
        runs = mlflow.search_runs(experiment_names=["frames-dspy"], output_format="list")
    finally:
        mlflow.set_tracking_uri(None)
    assert (out / "report.html").is_file() and (out / "config.json").is_file()
    assert _files_holding(out, SECRETS) == {}
    assert _files_holding(store, SECRETS) == {}  # the MLflow store: params and artifacts
    params = {k: v for run in runs for k, v in run.data.params.items()}
    assert params["settings.api_base"] == "http://frames:***@127.0.0.1:9/v1"
    assert params["settings.wiki_api"] == "https://wiki:***@wiki.example/w/api.php?key=***"
    with sqlite3.connect(store / "mlflow.db") as db:  # and nothing hides in the database
        dump = "\n".join(db.iterdump())
    assert not [s for s in SECRETS if s in dump]


def test_a_folder_written_before_redaction_resumes_and_loses_its_password(data, tmp_path):
    out = tmp_path / "run"
    url = "http://frames:s3cretA@127.0.0.1:9/v1"
    config = config_for(data, out, conditions=["naive"], api_base=url)
    run_evaluation(config, lm=program_lm(), judge_lm=judge(), progress=False)
    # An older version wrote the URL as it was given.
    written = json.loads((out / "config.json").read_text())
    written["settings"]["api_base"] = url
    (out / "config.json").write_text(json.dumps(written))
    config = config_for(data, out, conditions=["naive", "bm25-2"], api_base=url)
    run_evaluation(config, lm=program_lm(), judge_lm=judge(), progress=False)  # resumed
    assert _files_holding(out, SECRETS) == {}


def test_an_error_line_names_a_url_without_its_password(data, capsys, tmp_path):
    argv = ["--conditions", "naive", "--dataset", str(data["dataset"]), "--model", "openai/x"]
    argv += ["--api-base", "http://u:s3cretA@127.0.0.1:1/v1", "--out", str(tmp_path / "run")]
    code, _, err = call_main(argv, capsys)
    assert code == 2
    assert "nothing answers at api_base http://u:***@127.0.0.1:1/v1" in err
    assert "s3cretA" not in err
