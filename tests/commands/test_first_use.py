"""The main command on a fresh machine: no data folder, the questions from the hub, the corpus
fetched from Wikipedia once; and, offline, one clear line with exit status 2.

Wikipedia is the local MediaWiki-compatible server of ``tests/mediawiki_server.py``; the hub is
pointed at a dead port on 127.0.0.1, so the hub path runs up to where it would go online. No
request leaves the machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dspy.utils.dummies import DummyLM
from huggingface_hub import constants

from frames_dspy.commands import evaluate
from frames_dspy.data.corpus import load_corpus
from frames_dspy.data.download import DownloadError
from frames_dspy.data.mediawiki import cached_files, default_corpus_folder
from frames_dspy.data.questions import load_frames
from frames_dspy.run.session import open_articles, open_session
from frames_dspy.run.settings import ModelDataSettings
from tests.mediawiki_server import MediaWiki, serve_corpus
from tests.ports import dead_url

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parents[1] / "fixtures"
DATASET = FIXTURES / "eval_frames.csv"  # 3 questions, 7 links
HUB = "google/frames-benchmark"


@pytest.fixture
def fresh(monkeypatch, tmp_path) -> Path:
    """No data folder, an empty user cache, no proxy."""
    monkeypatch.delenv("FRAMES_DATA_DIR", raising=False)
    monkeypatch.setenv("FRAMES_DSPY_CACHE", str(tmp_path / "user-cache"))
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def wiki(tmp_path):
    """Every article of the eval fixture but "Water of Leith", which Wikipedia then lacks."""
    pages = tmp_path / "served.jsonl"
    lines = (FIXTURES / "eval_corpus.jsonl").read_text(encoding="utf-8").splitlines()
    pages.write_text(
        "\n".join(x for x in lines if '"title": "Water of Leith"' not in x), encoding="utf-8"
    )
    with serve_corpus(pages, lifetime=60) as server:
        yield server


@pytest.fixture
def fake_lms(monkeypatch):
    """main() cannot take an LM; give it fakes instead of the embedded model."""
    import frames_dspy.run.session

    def fake_make_lm(spec, **kwargs):
        return DummyLM(
            {
                "`[[ ## decision ## ]]`": {"explanation": "no", "decision": "FALSE"},
                "`[[ ## answer ## ]]`": {"answer": "Novak Djokovic"},
            }
        )

    monkeypatch.setattr(frames_dspy.run.session, "make_lm", fake_make_lm)


def call_main(argv, capsys) -> tuple[int, str, str]:
    try:
        code = evaluate.main(argv)
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- online: the corpus is fetched once, recorded, and reused ----------------------------------


def test_the_first_run_fetches_the_corpus_once_and_records_it(fresh, wiki, fake_lms, capsys):
    argv = ["--dataset", str(DATASET), "--wiki-api", wiki.url, "--conditions", "naive,oracle"]
    code, _, err = call_main([*argv, "--out", str(fresh / "run1"), "--limit", "1"], capsys)
    assert code == 0, err
    corpus = default_corpus_folder(wiki.url) / "pages.jsonl.gz"
    assert str(fresh / "user-cache" / "corpus") in str(corpus)
    assert "no corpus given: fetching the Wikipedia articles of 7 links" in err
    assert f"later runs reuse it, or pass --corpus {corpus}" in err
    assert "1 of 7 links found no article" in err
    assert "article/s" in err  # the progress bar, with its rate (and so an ETA)
    # Every link of the dataset was fetched, not only the selected question's two.
    assert len(wiki.of_kind("extracts|info")) == 6
    config = json.loads((fresh / "run1" / "config.json").read_text())
    assert config["settings"]["corpus"] == str(corpus)
    assert config["corpus_sha256"] == load_corpus(corpus).fingerprint
    assert config["corpus_articles"] == 6
    assert config["corpus_fetch"]["unresolved_links"] == 1
    assert config["corpus_fetch"]["links"] == 7
    assert config["corpus_fetch"]["requests"] == 7  # one lookup, six articles
    records = (fresh / "run1" / "predictions.jsonl").read_text().splitlines()
    oracle = [json.loads(r) for r in records if json.loads(r)["condition"] == "oracle"]
    # Question 0's two gold articles are both found in the fetched corpus.
    assert len(oracle[0]["gold_ids"]) == 2

    asked = len(wiki.requests)
    code, _, err = call_main([*argv, "--out", str(fresh / "run2"), "--quiet"], capsys)
    assert code == 0, err
    assert len(wiki.requests) == asked
    assert "fetching" not in err


def test_open_articles_fetches_for_optimize_compile_too(fresh, wiki):
    # optimize.compile opens its articles with the whole dataset and its progress callback.
    said: list[str] = []
    examples = load_frames(DATASET)
    settings = ModelDataSettings(dataset=str(DATASET), wiki_api=wiki.url)
    lm = DummyLM([{"answer": "x"}])
    articles = open_articles(
        settings, needed=True, examples=examples, say=said.append, progress=True
    )
    session = open_session(settings, articles=articles, retriever_needed=False, lm=lm, judge_lm=lm)
    assert len(session.store) == 6
    assert session.settings.corpus.endswith("pages.jsonl.gz") and settings.corpus is None
    assert session.provenance(examples)["corpus_fetch"]["unresolved_links"] == 1
    assert len(said) == 2
    with pytest.raises(ValueError, match="need a corpus: pass --corpus"):
        open_articles(settings, needed=True)


def test_a_naive_run_needs_no_corpus_and_fetches_nothing(fresh, wiki, fake_lms, capsys):
    argv = ["--dataset", str(DATASET), "--wiki-api", wiki.url, "--conditions", "naive"]
    code, _, err = call_main([*argv, "--out", str(fresh / "run"), "--quiet"], capsys)
    assert code == 0, err
    assert wiki.requests == []


# --- offline: one line, exit status 2 ----------------------------------------------------------


def test_wikipedia_down_is_one_line_and_status_2(fresh, capsys):
    dead = dead_url() + "/w/api.php"
    argv = ["--dataset", str(DATASET), "--wiki-api", dead, "--out", str(fresh / "run")]
    started = time.monotonic()
    code, out, err = call_main(argv, capsys)
    assert time.monotonic() - started < 10
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(
        f"error: could not download the Wikipedia articles of 7 FRAMES links from {dead}: "
        "the connection was refused"
    )
    assert "Connect to the internet and rerun, or point --corpus at a local" in err
    assert "FRAMES_DATA_DIR" in err
    assert not (fresh / "run").exists()


def test_verbose_shows_the_traceback_too(fresh, capsys):
    argv = ["--dataset", str(DATASET), "--wiki-api", dead_url(), "--out", str(fresh / "r")]
    code, _, err = call_main([*argv, "--verbose"], capsys)
    assert code == 2
    assert "Traceback" in err
    assert err.splitlines()[-1].startswith("error: could not download the Wikipedia articles")


@pytest.fixture
def hub(monkeypatch, tmp_path) -> Path:
    """The hub client pointed at a dead local port, with an empty cache of its own."""
    monkeypatch.setattr(constants, "ENDPOINT", dead_url())
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    return tmp_path / "hf"


def test_an_unreachable_hub_without_a_cached_copy_is_one_clear_error(fresh, hub):
    started = time.monotonic()
    with pytest.raises(DownloadError) as info:
        load_frames(HUB)
    assert time.monotonic() - started < 5  # the hub client's retry loop never ran
    message = str(info.value)
    assert message.startswith(
        f"could not download the FRAMES questions (hub dataset {HUB}, file test.tsv) from "
        f"{constants.ENDPOINT}: the connection was refused"
    )
    assert "point --dataset at a local copy of test.tsv" in message
    assert "FRAMES_DATA_DIR" in message


def test_hub_offline_mode_is_named(fresh, hub, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(DownloadError, match="HF_HUB_OFFLINE is set"):
        load_frames(HUB)


def test_an_unreachable_hub_with_a_cached_copy_uses_it(fresh, hub, caplog):
    commit = "0123456789abcdef0123456789abcdef01234567"
    folder = hub / "datasets--google--frames-benchmark"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(commit)
    (folder / "snapshots" / commit).mkdir(parents=True)
    tsv = (FIXTURES / "tiny" / "frames.tsv").read_text(encoding="utf-8")
    (folder / "snapshots" / commit / "test.tsv").write_text(tsv, encoding="utf-8")
    examples = load_frames(HUB)
    assert [ex.id for ex in examples] == [ex.id for ex in load_frames(FIXTURES / "tiny/frames.tsv")]
    assert "using the cached copy" in caplog.text


@pytest.mark.parametrize("module", ["frames_dspy.evaluate", "optimize.compile"])
def test_the_main_command_offline_exits_2_within_seconds(tmp_path, module):
    """The acceptance check, as a user runs it: no FRAMES_DATA_DIR, a fresh home, no hub."""
    env = {k: v for k, v in os.environ.items() if k != "FRAMES_DATA_DIR" and "proxy" not in k}
    env.update(HOME=str(tmp_path), HF_HOME=str(tmp_path / "hf"), HF_ENDPOINT=dead_url())
    env.pop("FRAMES_DSPY_CACHE", None)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", module, "--limit" if "evaluate" in module else "--trials", "10"],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert time.monotonic() - started < 10
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: could not download the FRAMES questions (hub dataset")
    assert "Connect to the internet and rerun" in done.stderr
    if "evaluate" in module:  # (optimize.compile makes its output folder first)
        assert not (tmp_path / "runs").exists()


def test_ctrl_c_during_the_first_fetch_keeps_what_came_and_a_rerun_resumes(tmp_path, monkeypatch):
    dataset = tmp_path / "frames.csv"
    rows = [
        f'{n},"Question {n}?",A{n},https://en.wikipedia.org/wiki/Page_{n},Post processing'
        for n in range(40)
    ]
    dataset.write_text("id,Prompt,Answer,wikipedia_link_1,reasoning_types\n" + "\n".join(rows))
    env = {k: v for k, v in os.environ.items() if k != "FRAMES_DATA_DIR" and "proxy" not in k}
    monkeypatch.setenv("FRAMES_DSPY_CACHE", str(tmp_path / "cache"))
    # A run that hangs prints every thread's stack when _ended aborts it.
    env.update(FRAMES_DSPY_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(REPO))
    env.update(PYTHONFAULTHANDLER="1")
    with MediaWiki(lifetime=60) as wiki:
        for n in range(40):
            wiki.add(f"Page {n}", f"text {n}")
        folder = default_corpus_folder(wiki.url) / "cache"
        command = [
            sys.executable,
            "-m",
            "frames_dspy.evaluate",
            "--dataset",
            str(dataset),
            "--wiki-api",
            wiki.url,
            "--out",
            str(tmp_path / "run"),
        ]
        seen = []
        for _ in range(2):
            process = subprocess.Popen(
                command, env=env, stderr=subprocess.PIPE, text=True, preexec_fn=_ctrl_c_heard
            )
            deadline = time.monotonic() + 120  # a guard against a hang, not a speed limit
            # Articles written; a hidden ".….tmp.json" is a write in flight, not yet kept.
            while len(_articles_in(folder)) < 3 + len(seen) * 3:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            process.send_signal(signal.SIGINT)
            _, err = _ended(process, within=120)
            assert process.returncode == 130, err
            assert f"fetch interrupted: the articles fetched so far are kept in {folder}" in err
            assert err.rstrip().endswith("interrupted before any question ran")
            assert "Traceback" not in err
            seen.append(err.split(" already there")[0].rsplit("(", 1)[1])
        kept_first = int(seen[1])
        assert seen[0] == "0" and kept_first >= 3
        assert not (tmp_path / "run").exists()


def _ctrl_c_heard() -> None:
    """Ctrl-C acts in the child as at a terminal. A suite started in the background (``nohup
    pytest &``) passes SIGINT on ignored, and Python then never raises KeyboardInterrupt: the
    signal was lost and the run went on to its questions."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ended(process: subprocess.Popen, *, within: float) -> tuple[str, str]:
    """``communicate`` with a guard against a hang; a run that does not end is aborted so its
    faulthandler prints every thread's stack (``PYTHONFAULTHANDLER`` in its environment), and
    the failure shows where it hung."""
    try:
        return process.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        _, err = process.communicate(timeout=30)
        pytest.fail(f"the interrupted run did not end within {within:g} s; its stderr:\n{err}")


def _articles_in(folder: Path) -> list[Path]:
    return cached_files(folder)
