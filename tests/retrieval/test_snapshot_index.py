"""Tests for a Wikipedia snapshot as a corpus: streaming, the on-disk index, resume, damage.

The snapshot is a tiny parquet file in the schema of ``wikimedia/wikipedia`` (``id``, ``url``,
``title``, ``text``), made here from ``tests/fixtures/eval_corpus.jsonl`` plus filler articles, and
read through ``datasets`` exactly as the hub snapshot is. Chunks are small, so a build has several.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dspy.utils.dummies import DummyLM

from frames_dspy.commands import evaluate
from frames_dspy.data.corpus import CorpusError
from frames_dspy.data.mediawiki import default_corpus_folder
from frames_dspy.data.snapshot import Position, is_snapshot, parse_snapshot, stream_batches
from frames_dspy.retrieval.bm25 import build_retriever
from frames_dspy.retrieval.disk_index import (
    MANIFEST,
    SnapshotRetriever,
    index_folder,
    open_snapshot,
)
from frames_dspy.run.evaluation import EvalConfig, run_evaluation
from frames_dspy.run.session import article_source
from frames_dspy.run.settings import ModelDataSettings

FIXTURES = Path(__file__).parents[1] / "fixtures"
REPO = Path(__file__).resolve().parents[2]
FILLER_WORDS = (
    "river", "mountain", "castle", "novel", "league",
    "season", "album", "painter", "railway", "election",
)  # fmt: skip
QUERIES = [
    "Who won the 2021 French Open men's singles?",
    "When was Trinity College Dublin founded?",
    "Bram Stoker Dracula novel",
    "castle railway season",
]


def write_snapshot(path: Path, *, fillers: int = 200) -> Path:
    """The fixture's 9 articles among ``fillers`` generated ones, as one parquet file."""
    real = [json.loads(line) for line in (FIXTURES / "eval_corpus.jsonl").open(encoding="utf-8")]
    rows = {"id": [], "url": [], "title": [], "text": []}
    for i in range(fillers + len(real)):
        if i % 23 == 5 and real:
            article = real.pop()
            title, text = article["title"], article["text"]
        else:
            words = [FILLER_WORDS[(i * 7 + j * 3) % len(FILLER_WORDS)] for j in range(12)]
            title, text = f"Filler {i}", " ".join(words)
        rows["id"].append(str(100 + i))
        rows["url"].append("https://en.wikipedia.org/wiki/" + title.replace(" ", "_"))
        rows["title"].append(title)
        rows["text"].append(text)
    pq.write_table(pa.table(rows), path, row_group_size=40)
    return path


@pytest.fixture
def snapshot_file(tmp_path) -> Path:
    return write_snapshot(tmp_path / "snapshot.parquet")


def top_ids(retriever, queries=QUERIES, k=3) -> list[list[str]]:
    return [[hit.article_id for hit in hits] for hits in retriever.search_many(queries, k)]


# --- naming a snapshot -------------------------------------------------------------------


def test_corpus_values_that_name_a_snapshot(tmp_path, snapshot_file):
    assert is_snapshot("wikipedia") and is_snapshot("wikipedia:20220301.simple")
    assert is_snapshot(str(snapshot_file)) and is_snapshot(str(tmp_path))
    assert not is_snapshot(str(FIXTURES / "eval_corpus.jsonl")) and not is_snapshot(None)
    assert parse_snapshot("wikipedia").config == "20231101.en"
    assert parse_snapshot("wikipedia:20220301.simple").name == "wikipedia:20220301.simple"
    assert parse_snapshot(str(tmp_path)).files == (snapshot_file,)


@pytest.mark.parametrize("value", ["wikipedia:latest", "wikipedia:2023-11-01.en", "wikipedia:"])
def test_a_bad_snapshot_name_says_what_a_good_one_looks_like(value):
    with pytest.raises(CorpusError, match="20231101.en") as info:
        parse_snapshot(value)
    assert repr(value) in str(info.value)


def test_unreadable_or_foreign_parquet_is_refused(tmp_path):
    garbage = tmp_path / "broken.parquet"
    garbage.write_bytes(b"not a parquet file at all")
    with pytest.raises(CorpusError, match="not a readable parquet file"):
        parse_snapshot(str(garbage))
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"title": ["A"], "body": ["text"]}), other)
    with pytest.raises(CorpusError, match=r"lacks column\(s\) \['id', 'url', 'text'\]"):
        parse_snapshot(str(other))
    with pytest.raises(CorpusError, match="does not exist"):
        parse_snapshot(str(tmp_path / "nowhere.parquet"))


def test_the_stream_comes_in_batches_and_starts_again_from_any_position(tmp_path):
    # Two files with row groups of 40, batches of 50: positions fall inside row groups, at a
    # file's end and inside the second file.
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    write_snapshot(first, fillers=112)
    pq.write_table(pq.read_table(first).slice(0, 76), second, row_group_size=40)
    snapshot = parse_snapshot(str(tmp_path))
    assert snapshot.files == (first, second) and snapshot.expected_rows() == 121 + 76
    batches = list(stream_batches(snapshot, batch_size=50))
    assert [len(b["id"]) for b, _ in batches] == [50, 50, 50, 47]
    assert [p.rows for _, p in batches] == [50, 100, 150, 197]
    everything = [i for b, _ in batches for i in b["id"]]
    for _, position in batches:
        assert position.loadable
        rest = [
            i for b, _ in stream_batches(snapshot, start=position, batch_size=50) for i in b["id"]
        ]
        assert rest == everything[position.rows :]
    # A position without the stream's state (another datasets wrote it) is reached by reading.
    unknown = Position(150, state=None)
    rest = [i for b, _ in stream_batches(snapshot, start=unknown, batch_size=50) for i in b["id"]]
    assert rest == everything[150:]
    assert Position.from_json(batches[1][1].to_json()) == batches[1][1]


def test_a_build_that_reads_another_count_than_its_files_hold_is_refused(
    tmp_path, snapshot_file, monkeypatch
):
    from frames_dspy.retrieval import disk_index

    def losing_a_batch(*args, **kwargs):
        for n, item in enumerate(stream_batches(*args, **kwargs)):
            if n != 2:
                yield item

    monkeypatch.setattr(disk_index, "stream_batches", losing_a_batch)
    snapshot = parse_snapshot(str(snapshot_file))
    with pytest.raises(CorpusError, match=r"read 159 articles but its parquet files hold 209"):
        open_snapshot(snapshot, index_dir=tmp_path, chunk_size=50)
    folder = index_folder(snapshot, index_dir=tmp_path, chunk_size=50)
    assert not (folder / MANIFEST).exists() and not (folder / "build.json").exists()
    monkeypatch.undo()
    notes = []
    store = open_snapshot(snapshot, index_dir=tmp_path, chunk_size=50, say=notes.append)
    assert len(store) == 209 and not any("resuming" in note for note in notes)


# --- building and searching ------------------------------------------------------------


def test_build_search_and_resolve(tmp_path, snapshot_file):
    notes = []
    store = open_snapshot(
        parse_snapshot(str(snapshot_file)),
        index_dir=tmp_path / "idx",
        chunk_size=50,
        say=notes.append,
    )
    assert len(store) == 209 and store.manifest["chunks"] == 5
    assert any("indexing" in note for note in notes)
    retriever = SnapshotRetriever(store)
    with pytest.raises(ValueError, match="SnapshotRetriever"):
        build_retriever(store)
    (hit,) = retriever.search("2021 French Open men's singles Djokovic", 1)
    assert hit.title == "2021 French Open – Men's singles"
    assert store[hit.article_id].text.startswith("Novak Djokovic defeated")
    # A gold link resolves by its title; excluded articles are skipped, not counted.
    found = store.resolve(
        "https://en.wikipedia.org/wiki/2021_French_Open_%E2%80%93_Men%27s_singles"
    )
    assert found is not None and found.id == hit.article_id
    assert store.resolve("https://en.wikipedia.org/wiki/No_such_article") is None
    second = retriever.search(
        "2021 French Open men's singles Djokovic", 1, exclude=[hit.article_id]
    )
    assert second and second[0].article_id != hit.article_id
    # Opening again loads the finished index instead of building it.
    notes.clear()
    again = open_snapshot(
        parse_snapshot(str(snapshot_file)),
        index_dir=tmp_path / "idx",
        chunk_size=50,
        say=notes.append,
    )
    assert notes == [] and again.fingerprint == store.fingerprint


def test_a_redirect_resolves_through_the_link_tables_title(tmp_path, snapshot_file):
    table = tmp_path / "links.tsv"
    table.write_text(
        "link_normalized\tpage_id\tpage_title\n"
        "en.wikipedia.org/wiki/Djokovic_final_2021\tx\t2021 French Open – Men's singles\n",
        "utf-8",
    )
    store = open_snapshot(
        parse_snapshot(str(snapshot_file)),
        index_dir=tmp_path / "idx",
        chunk_size=50,
        aliases=table,
    )
    article = store.resolve("https://en.wikipedia.org/wiki/Djokovic_final_2021")
    assert article is not None and article.title == "2021 French Open – Men's singles"


def test_without_a_local_copy_a_snapshot_resolves_links_through_the_fetched_table(
    tmp_path, snapshot_file, monkeypatch
):
    # A first run fetched the FRAMES articles into the user cache (write_corpus's table); a
    # later --corpus wikipedia run without FRAMES_DATA_DIR resolves redirects through it.
    monkeypatch.delenv("FRAMES_DATA_DIR", raising=False)
    settings = ModelDataSettings(corpus=str(snapshot_file))
    assert article_source(settings).aliases is None  # nothing fetched yet
    table = default_corpus_folder() / "frames_link_to_page.tsv"
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text(
        "link_normalized\tpage_id\tpage_title\n"
        "en.wikipedia.org/wiki/Djokovic_final_2021\t7\t2021 French Open – Men's singles\n",
        "utf-8",
    )
    source = article_source(settings)
    assert source.aliases == str(table)
    store = open_snapshot(source.snapshot, index_dir=tmp_path / "idx", aliases=source.aliases)
    article = store.resolve("https://en.wikipedia.org/wiki/Djokovic_final_2021")
    assert article is not None and article.title == "2021 French Open – Men's singles"


_KILLED_BUILD = """
import sys, time
from frames_dspy.retrieval import disk_index
from frames_dspy.data.snapshot import parse_snapshot
index_chunk = disk_index._index_chunk
def slow(*args, **kwargs):
    index_chunk(*args, **kwargs)
    print("chunk", flush=True)
    time.sleep(30)
disk_index._index_chunk = slow
disk_index.open_snapshot(
    parse_snapshot(sys.argv[1]), index_dir=sys.argv[2], chunk_size=50, workers=2
)
"""


def test_a_killed_build_resumes_to_the_same_index(tmp_path, snapshot_file):
    whole = open_snapshot(
        parse_snapshot(str(snapshot_file)), index_dir=tmp_path / "a", chunk_size=50
    )
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_BUILD, str(snapshot_file), str(tmp_path / "b")],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert child.stdout.readline().strip() == "chunk"  # one chunk committed, then killed
        workers = psutil.Process(child.pid).children()
        assert len(workers) >= 2  # the tokenizers (and multiprocessing's resource tracker)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    # The tokenizing workers die with the builder instead of idling on as orphans.
    gone, alive = psutil.wait_procs(workers, timeout=60)
    assert [w for w in alive if w.status() != psutil.STATUS_ZOMBIE] == []
    snapshot = parse_snapshot(str(snapshot_file))
    folder = index_folder(snapshot, index_dir=tmp_path / "b", chunk_size=50)
    assert not (folder / MANIFEST).exists()
    notes = []
    resumed = open_snapshot(snapshot, index_dir=tmp_path / "b", chunk_size=50, say=notes.append)
    assert any("resuming the index" in note and "article 50" in note for note in notes)
    assert len(resumed) == len(whole) and resumed.fingerprint == whole.fingerprint
    assert top_ids(SnapshotRetriever(resumed)) == top_ids(SnapshotRetriever(whole))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_tokenizer_whose_builder_died_while_it_started_ends_at_once():
    # The race behind a killed build's orphan: the worker sets its kill-with-parent signal
    # only once it has started, and by then the builder may be gone.
    code = (
        "import os, sys; from frames_dspy.retrieval.disk_index import _die_with_parent; "
        "_die_with_parent(int(sys.argv[1])); print('alive')"
    )
    for parent, alive in ((os.getpid(), True), (os.getpid() + 1_000_000, False)):
        done = subprocess.run(
            [sys.executable, "-c", code, str(parent)], capture_output=True, text=True, cwd=REPO
        )
        assert done.returncode == 0, done.stderr
        assert (done.stdout.strip() == "alive") is alive


def test_a_damaged_index_is_detected_and_rebuilt(tmp_path, snapshot_file):
    snapshot = parse_snapshot(str(snapshot_file))
    store = open_snapshot(snapshot, index_dir=tmp_path, chunk_size=50)
    expected = top_ids(SnapshotRetriever(store))
    lookup = store.folder / "lookup" / "title.hash.npy"
    data = bytearray(lookup.read_bytes())
    data[-1] ^= 0xFF  # same size, another hash
    lookup.write_bytes(bytes(data))
    notes = []
    rebuilt = open_snapshot(snapshot, index_dir=tmp_path, chunk_size=50, say=notes.append)
    assert any("damaged" in note and "SHA-256" in note for note in notes)
    assert top_ids(SnapshotRetriever(rebuilt)) == expected
    # A half-written chunk (a file cut short) fails the size check the same way.
    texts = rebuilt.folder / "chunks" / "00001" / "texts.bin"
    texts.write_bytes(texts.read_bytes()[:10])
    notes.clear()
    again = open_snapshot(snapshot, index_dir=tmp_path, chunk_size=50, say=notes.append)
    assert any("damaged" in note and "size" in note for note in notes)
    assert top_ids(SnapshotRetriever(again)) == expected


# --- a run on a snapshot ------------------------------------------------------------------


def test_a_run_on_a_snapshot_records_its_index(tmp_path, snapshot_file):
    lm = DummyLM(
        {
            "`[[ ## queries ## ]]`": {"queries": ["Dracula novel 1897", "MLS Cup 2021"]},
            "`[[ ## answer ## ]]`": {"answer": "Novak Djokovic"},
        }
    )
    judge = DummyLM(
        {
            "`[[ ## decision ## ]]`": {"explanation": "no", "decision": "FALSE"},
            "`[[ ## answer ## ]]`": {"answer": "x"},
        }
    )
    config = EvalConfig(
        conditions=["bm25-2", "oracle", "multistep-vanilla"],
        dataset=str(FIXTURES / "eval_frames.csv"),
        corpus=str(snapshot_file),
        rounds=2,
        k=2,
        n_docs=2,
        context_tokens=400,
        out=str(tmp_path / "run"),
    )
    summary = run_evaluation(config, lm=lm, judge_lm=judge, progress=False)
    assert all(row.n == 3 for row in summary.rows.values())
    recorded = json.loads((tmp_path / "run" / "config.json").read_text())
    assert recorded["settings"]["retriever"] == "tantivy"
    assert recorded["settings"]["corpus"] == str(snapshot_file.resolve())
    index = recorded["corpus_index"]
    assert index["articles"] == 209 and index["identity"]["engine"]["name"] == "tantivy"
    assert index["fingerprint"] == recorded["corpus_sha256"]
    table = (tmp_path / "run" / "table.md").read_text()
    assert f"CORPUS: {snapshot_file.resolve()} (209 articles, tantivy BM25 k1=1.2" in table
    assert "gold links found 7 of 7, 3 of 3 questions fully covered" in table
    records = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").open()]
    oracle = [r for r in records if r["condition"] == "oracle"]
    assert all(r["recall"] == [1.0] for r in oracle)  # every fixture gold is in the snapshot


def test_a_bad_snapshot_on_the_command_line_is_one_line_and_exit_2(tmp_path, capsys):
    code = evaluate.main(
        [
            "--corpus",
            "wikipedia:latest",
            "--conditions",
            "bm25-2",
            "--limit",
            "1",
            "--dataset",
            str(FIXTURES / "eval_frames.csv"),
            "--out",
            str(tmp_path / "run"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "'latest' is not a wikimedia/wikipedia snapshot name" in err
    assert "Traceback" not in err


def test_a_snapshot_refuses_rank_bm25(tmp_path, snapshot_file):
    config = EvalConfig(
        conditions=["bm25-2"],
        dataset=str(FIXTURES / "eval_frames.csv"),
        corpus=str(snapshot_file),
        retriever="rank-bm25",
        out=str(tmp_path / "r"),
    )
    with pytest.raises(CorpusError, match="drop --retriever"):
        run_evaluation(config, lm=DummyLM([]), judge_lm=DummyLM([]), progress=False)


def test_waiting_builders_share_one_build(tmp_path, snapshot_file):
    # Two processes opening the same new index: one builds, the other waits and loads it.
    script = (
        "import sys; from frames_dspy.retrieval.disk_index import open_snapshot;"
        "from frames_dspy.data.snapshot import parse_snapshot;"
        "s = open_snapshot(parse_snapshot(sys.argv[1]), index_dir=sys.argv[2], chunk_size=50);"
        "print(len(s), s.fingerprint)"
    )
    children = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(snapshot_file), str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        for _ in range(2)
    ]
    outputs = [child.communicate(timeout=300) for child in children]
    assert all(child.returncode == 0 for child in children), outputs
    assert outputs[0][0] == outputs[1][0] and outputs[0][0].startswith("209 ")


def test_the_data_command_reports_a_snapshots_coverage(
    tmp_path, snapshot_file, capsys, monkeypatch
):
    from frames_dspy.commands import data

    monkeypatch.setenv("FRAMES_DSPY_CACHE", str(tmp_path / "cache"))
    code = data.main(
        ["--dataset", str(FIXTURES / "eval_frames.csv"), "--corpus", str(snapshot_file), "--json"]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["corpus"]["articles"] == 209 and summary["corpus"]["link_coverage"] == 1.0
    assert (
        data.main(["--dataset", str(FIXTURES / "eval_frames.csv"), "--corpus", "wikipedia:x"]) == 2
    )
    assert "'x' is not a wikimedia/wikipedia snapshot name" in capsys.readouterr().err
