"""The Wikipedia index built from a server that answers like the Hugging Face hub.

``tests/hub_server.py`` serves a ``wikimedia/wikipedia``-shaped repo (a README listing configs,
parquet shards behind a CDN that answers range requests); the build runs in a subprocess with
``HF_ENDPOINT`` pointing at it, so ``huggingface_hub`` and ``datasets`` run their real code. The
server drops connections, answers 429 and 5xx, and is stopped and restarted; every build must end
with the same fingerprint and article count as an uninterrupted one, resumed builds must read only
what they had not indexed (bytes counted by the server), and a pinned commit is what is indexed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hub_server import WIKIPEDIA, HubServer, hub_env, wikipedia_files

REPO = Path(__file__).resolve().parents[2]
CONFIG = "20231101.xx"
# Shards of about 430 articles (the real 20231101.en has 41 of about 156,000) read in chunks of
# 100 (the default is 25,000): a stop at 50% falls inside a shard, as it usually does.
ARTICLES, SHARDS, CHUNK, WORDS = 3000, 7, 100, 300

# Builds the index (chunks of CHUNK articles, one tokenizing process) and prints what it holds;
# argv: corpus, index folder, [stop after this many chunks]. One retry of ours, at once.
_BUILD = """
import json, os, sys
from frames_dspy.data import hub
from frames_dspy.data.snapshot import parse_snapshot
from frames_dspy.retrieval import disk_index
from frames_dspy.retrieval.disk_index import SnapshotRetriever, open_snapshot
hub.RETRY_WAITS = (0.1,)
if len(sys.argv) > 3:
    stop, index_chunk, done = int(sys.argv[3]), disk_index._index_chunk, []
    def index_then_stop(*args, **kwargs):
        index_chunk(*args, **kwargs)
        done.append(1)
        if len(done) == stop:
            os._exit(3)  # killed right after a chunk is committed
    disk_index._index_chunk = index_then_stop
try:
    store = open_snapshot(
        parse_snapshot(sys.argv[1]), index_dir=sys.argv[2], chunk_size=CHUNK, workers=1, say=print
    )
except Exception as err:
    print("ERROR", type(err).__name__, err)
    sys.exit(2)
hits = SnapshotRetriever(store).search_many(["castle railway", "French Open Djokovic"], 3)
print("RESULT", json.dumps({
    "articles": len(store),
    "fingerprint": store.fingerprint,
    "snapshot": store.manifest["snapshot"],
    "revision": store.manifest["revision"],
    "top": [[h.article_id for h in found] for found in hits],
}))
""".replace("CHUNK", str(CHUNK))


def build(env: dict, corpus: str, index: Path, *, stop: int | None = None):
    """Run a build; (exit status, notes and errors printed, the result if it finished)."""
    argv = [sys.executable, "-c", _BUILD, corpus, str(index), *([str(stop)] if stop else [])]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240, cwd=REPO)
    lines = done.stdout.splitlines()
    result = next((json.loads(x[7:]) for x in lines if x.startswith("RESULT ")), None)
    return done.returncode, "\n".join(lines) + "\n" + done.stderr, result


@pytest.fixture
def hub():
    with HubServer(lifetime=300) as server:
        server.commit(
            WIKIPEDIA,
            wikipedia_files({CONFIG: ARTICLES, "20231101.yy": 300}, shards=SHARDS, words=WORDS),
            "initial",
        )
        yield server


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted build on a fault-free server, and the parquet bytes it was served."""
    tmp = tmp_path_factory.mktemp("reference")
    with HubServer(lifetime=300) as server:
        server.commit(
            WIKIPEDIA,
            wikipedia_files({CONFIG: ARTICLES, "20231101.yy": 300}, shards=SHARDS, words=WORDS),
            "initial",
        )
        code, out, result = build(hub_env(tmp, server), f"wikipedia:{CONFIG}", tmp / "idx")
        assert code == 0, out
        result["bytes"] = server.counts.files_bytes()
        result["body_bytes"] = server.counts.files_bytes(tails=False)
        result["data_bytes"] = sum(
            len(v) for k, v in server.repos[WIKIPEDIA][-1].files.items() if k.startswith(CONFIG)
        )
    return result


# --- a build, pinned --------------------------------------------------------------------------


def test_a_build_from_the_hub_is_pinned_to_a_commit_and_reused_offline(tmp_path, hub, reference):
    env = hub_env(tmp_path, hub)
    sha = hub.sha(WIKIPEDIA)
    code, out, result = build(env, f"wikipedia:{CONFIG}", tmp_path / "idx")
    assert code == 0, out
    assert f"20231101.xx: main is commit {sha}" in out
    assert result["snapshot"] == f"wikipedia:{CONFIG}@{sha}" and result["revision"] == sha
    assert result["articles"] == ARTICLES
    assert result["fingerprint"] == reference["fingerprint"]
    (folder,) = (tmp_path / "idx").glob("wikipedia-*")
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["identity"]["snapshot"] == {
        "dataset": WIKIPEDIA,
        "config": CONFIG,
        "revision": sha,
    }
    # Offline, the finished index is used: by its commit, and by the plain name (the commit
    # remembered for it, said in a line).
    asked = len(hub.counts.requests)
    offline = hub_env(tmp_path, hub, HF_HUB_OFFLINE="1")
    for corpus in (f"wikipedia:{CONFIG}@{sha}", f"wikipedia:{CONFIG}"):
        code, out, again = build(offline, corpus, tmp_path / "idx")
        assert code == 0, out
        assert again["fingerprint"] == result["fingerprint"]
    assert f"wikipedia:{CONFIG} is wikimedia/wikipedia {CONFIG} at commit {sha}" in out
    assert len(hub.counts.requests) == asked  # not one request
    # Offline, a config never resolved cannot be pinned: one line naming the fixes.
    code, out, _ = build(offline, "wikipedia:20231101.yy", tmp_path / "idx")
    assert code == 2
    assert "ERROR DownloadError could not download the commit of wikimedia/wikipedia@main" in out
    assert "HF_HUB_OFFLINE is set" in out and "--corpus wikipedia:CONFIG@COMMIT" in out


def test_pinning_matters_when_main_moves(tmp_path, hub):
    env = hub_env(tmp_path, hub)
    first = hub.sha(WIKIPEDIA)
    code, out, old = build(env, f"wikipedia:{CONFIG}", tmp_path / "idx")
    assert code == 0, out
    # A new commit on main: more articles, other text, in shards of the same names.
    second = hub.commit(
        WIKIPEDIA,
        wikipedia_files({CONFIG: ARTICLES + 100}, shards=SHARDS, words=WORDS, edition=1),
        "new dump",
    )
    code, out, plain = build(env, f"wikipedia:{CONFIG}", tmp_path / "idx")
    assert code == 0, out
    assert plain["revision"] == first and plain["fingerprint"] == old["fingerprint"]
    assert "add @main to move to the newest commit" in out
    code, out, moved = build(env, f"wikipedia:{CONFIG}@main", tmp_path / "idx")
    assert code == 0, out
    assert moved["revision"] == second and moved["articles"] == ARTICLES + 100
    assert moved["fingerprint"] != old["fingerprint"]
    # The plain name now follows the last resolved commit; the old one stays addressable.
    code, out, plain = build(env, f"wikipedia:{CONFIG}", tmp_path / "idx")
    assert plain["revision"] == second
    code, out, pinned = build(env, f"wikipedia:{CONFIG}@{first}", tmp_path / "idx")
    assert pinned["fingerprint"] == old["fingerprint"] and pinned["articles"] == ARTICLES
    assert len(list((tmp_path / "idx").glob("wikipedia-*"))) == 2


def test_a_missing_config_or_revision_is_one_line(tmp_path, hub):
    env = hub_env(tmp_path, hub)
    code, out, _ = build(env, "wikipedia:20231101.zz", tmp_path / "idx")
    assert code == 2
    assert "ERROR CorpusError wikimedia/wikipedia has no snapshot '20231101.zz' at commit" in out
    # Named with a commit, the config is found missing by datasets when the build starts.
    code, out, _ = build(env, f"wikipedia:20231101.zz@{hub.sha(WIKIPEDIA)}", tmp_path / "idx")
    assert code == 2
    assert "ERROR CorpusError wikimedia/wikipedia has no snapshot '20231101.zz' at commit" in out
    code, out, _ = build(env, f"wikipedia:{CONFIG}@nosuchbranch", tmp_path / "idx")
    assert code == 2
    assert "ERROR CorpusError wikimedia/wikipedia has no revision 'nosuchbranch'" in out
    assert "Traceback" not in out
    assert not (tmp_path / "idx" / "pinned-revisions.json").exists()  # nothing remembered


# --- resuming by position ----------------------------------------------------------------------


def test_a_stopped_build_resumes_by_position_and_reads_only_the_rest(tmp_path, hub, reference):
    """Stopped at 50%, resumed: the same index, and about one pass over the data, where
    re-reading the indexed rows (a skip) costs half a pass more."""
    env = hub_env(tmp_path, hub)
    half = ARTICLES // CHUNK // 2
    code, out, _ = build(env, f"wikipedia:{CONFIG}", tmp_path / "idx", stop=half)
    assert code == 3, out
    stopped = hub.counts.files_bytes()
    # Offline, an unfinished index is said in one line, and kept.
    offline = hub_env(tmp_path, hub, HF_HUB_OFFLINE="1")
    code, out, _ = build(offline, f"wikipedia:{CONFIG}", tmp_path / "idx")
    assert code == 2
    assert "HF_HUB_OFFLINE is set. Connect to the internet and rerun (the unfinished index" in out
    code, out, result = build(env, f"wikipedia:{CONFIG}", tmp_path / "idx")
    assert code == 0, out
    assert f"at article {half * CHUNK:,} (from its saved stream position)" in out
    assert result["fingerprint"] == reference["fingerprint"]
    assert result["articles"] == ARTICLES and result["top"] == reference["top"]
    total = hub.counts.files_bytes() / reference["bytes"]
    body = hub.counts.files_bytes(tails=False) / reference["body_bytes"]
    print(
        f"\nparquet bytes served: uninterrupted {reference['bytes']:,} "
        f"({reference['body_bytes']:,} outside footers; the files hold "
        f"{reference['data_bytes']:,}); stopped at 50% {stopped:,} + resumed "
        f"{hub.counts.files_bytes() - stopped:,}: {total:.3f} of uninterrupted "
        f"({body:.3f} outside footers)"
    )
    # Resuming reads the shard the position is in from its start again (datasets regenerates a
    # shard's tables up to the position): at most one shard more, here 1/SHARDS of the data.
    assert 1.0 <= body <= 1 + 1.1 / SHARDS
    assert total <= 1 + 1.5 / SHARDS


def test_a_position_saved_by_another_datasets_is_not_loaded(tmp_path, hub, reference):
    """A saved stream state is loaded only by the datasets version that wrote it; otherwise the
    build reads the indexed rows again (and discards them itself) and still ends the same."""
    env = hub_env(tmp_path, hub)
    half = ARTICLES // CHUNK // 2
    code, out, _ = build(env, f"wikipedia:{CONFIG}", tmp_path / "idx", stop=half)
    assert code == 3, out
    (state_file,) = (tmp_path / "idx").glob("wikipedia-*/build.json")
    state = json.loads(state_file.read_text())
    assert [p["rows"] for p in state["positions"]] == [(half - 1) * CHUNK, half * CHUNK]
    for position in state["positions"]:
        position["format"] = "datasets 0.0.1, stream 1"
    state_file.write_text(json.dumps(state))
    stopped = hub.counts.files_bytes()
    code, out, result = build(env, f"wikipedia:{CONFIG}", tmp_path / "idx")
    assert code == 0, out
    assert (
        f"by reading the first {half * CHUNK:,} articles again (its position was saved by "
        "datasets 0.0.1" in out
    )
    assert result["fingerprint"] == reference["fingerprint"]
    body = hub.counts.files_bytes(tails=False) / reference["body_bytes"]
    print(
        f"\nre-reading instead of the saved position: {stopped:,} + "
        f"{hub.counts.files_bytes() - stopped:,} bytes; {body:.3f} of uninterrupted outside footers"
    )
    assert body >= 1.45  # the first half read twice


# --- the network failing ---------------------------------------------------------------------


def test_the_build_rides_out_dropped_connections_429_and_5xx(tmp_path, hub, reference):
    hub.drop(20_000, times=2, match="train-00002")  # cut mid-shard, twice
    hub.fail(429, times=2, match="train-00003")  # Retry-After: 0
    # Seven 503s: more than the hub client's try and five retries, so the stream fails and
    # is started again from its last position.
    hub.fail(503, times=7, match="train-00001-of-00007.parquet data")
    hub.fail(500, times=1, match="README")
    code, out, result = build(hub_env(tmp_path, hub), f"wikipedia:{CONFIG}", tmp_path / "idx")
    assert code == 0, out
    assert hub.counts.faults == {"drop": 2, 429: 2, 503: 7, 500: 1}
    assert "(the server answered HTTP 503); retrying from there" in out
    assert result["fingerprint"] == reference["fingerprint"] and result["articles"] == ARTICLES


def test_the_build_rides_out_a_server_stopped_and_restarted(tmp_path, hub, reference):
    hub.outage(reference["bytes"] // 3, down=2.0)  # mid-stream; open transfers are cut
    code, out, result = build(hub_env(tmp_path, hub), f"wikipedia:{CONFIG}", tmp_path / "idx")
    assert code == 0, out
    assert hub.counts.faults["outage"] == 1
    assert result["fingerprint"] == reference["fingerprint"] and result["articles"] == ARTICLES


def test_a_hub_that_stays_down_stops_the_build_in_one_line_and_a_rerun_resumes(
    tmp_path, hub, reference
):
    # Every read of a data page of one shard fails: the hub client's retries and ours give up.
    hub.fail(503, times=1000, match="train-00003-of-00007.parquet data")
    env = hub_env(tmp_path, hub)
    code, out, _ = build(env, f"wikipedia:{CONFIG}", tmp_path / "idx")
    assert code == 2, f"exit status {code}\n{out}"
    (line,) = [x for x in out.splitlines() if x.startswith("ERROR")]
    assert line.startswith(
        "ERROR DownloadError could not download wikimedia/wikipedia 20231101.xx (commit "
    )
    assert "the server answered HTTP 503" in line
    assert "articles indexed so far are kept; the next run reads on" in line
    assert "--corpus PATH to a local parquet copy" in line
    print("\n" + line)
    hub.faults.clear()
    code, out, result = build(env, f"wikipedia:{CONFIG}", tmp_path / "idx")
    assert code == 0, out
    assert "(from its saved stream position)" in out
    assert result["fingerprint"] == reference["fingerprint"]
