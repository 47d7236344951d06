"""Wikipedia-scale retrieval: the on-disk tantivy index against bm25s, at growing corpus sizes.

Run ``python -m benchmarks.wikipedia_scale --corpora DIR [DIR ...]`` on snapshots made by
``python -m benchmarks.synthetic_wikipedia`` (FRAMES articles planted among generated ones), with
``FRAMES_DATA_DIR`` pointing at the offline data. For each corpus and engine it measures, each in
a fresh process so memory is that work's own:

* **build**: seconds, articles per second, peak resident memory, bytes on disk;
* **query**: the 824 FRAMES questions one at a time on one thread, k = 10: queries per second,
  p50 and p99 latency, peak resident memory (index opened and every question asked), and the
  gold articles' recall@2/4/10 with the question as the query.

Engines: ``tantivy`` (the project's on-disk index, :mod:`frames_dspy.retrieval.disk_index`),
``bm25s`` (the
in-memory index the FRAMES corpus uses, the store's texts in memory as it runs today) and
``bm25s-mmap`` (the same index saved and reopened with ``mmap=True``); bm25s only up to
``--bm25s-max`` articles. ``--agreement`` first compares tantivy with today's bm25s on the FRAMES
corpus itself (recall within 0.01 is the bar). Last, each cost is fitted against size and
predicted for the 6,407,814 articles of ``wikimedia/wikipedia`` 20231101.en.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.retrieval import RECALL_AT, load_questions, peak_mb
from frames_dspy.base import paths
from frames_dspy.data.corpus import Article, ArticleStore, load_corpus
from frames_dspy.retrieval.bm25 import build_retriever

SNAPSHOT_ARTICLES = 6_407_814
ENGINES = ("tantivy", "bm25s", "bm25s-mmap")


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _parquet_store(corpus: Path) -> ArticleStore:
    """The whole parquet snapshot as an in-memory store (what bm25s needs today)."""
    import pyarrow.parquet as pq

    articles = []
    for file in sorted(corpus.glob("*.parquet")):
        table = pq.read_table(file, columns=["id", "title", "text"]).to_pydict()
        articles += [Article(*row, source="wikipedia") for row in zip(*table.values(), strict=True)]
    return ArticleStore(articles)


def _open(engine: str, corpus: Path, index_dir: Path):
    """The store and retriever of one engine (built if the folder holds no index yet)."""
    if engine == "tantivy":
        from frames_dspy.data.snapshot import parse_snapshot
        from frames_dspy.retrieval.disk_index import SnapshotRetriever, open_snapshot

        store = open_snapshot(parse_snapshot(str(corpus)), index_dir=index_dir)
        return store, SnapshotRetriever(store)
    store = _parquet_store(corpus)
    mmap = engine == "bm25s-mmap"
    return store, build_retriever(store, backend="bm25s", index_dir=index_dir, mmap=mmap)


class _TreePeak:
    """The peak resident memory of this process plus its children (the tokenizing workers),
    sampled every 0.1 s; without psutil, this process's own peak."""

    def __init__(self) -> None:
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        try:
            import psutil
        except ImportError:
            return
        me = psutil.Process()
        while not self._stop.wait(0.1):
            total = 0
            for process in [me, *me.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    total += process.memory_info().rss
            self.peak = max(self.peak, total / 2**20)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return max(self.peak, peak_mb())


def _child(engine: str, phase: str, corpus: Path, index_dir: Path, limit: int | None) -> dict:
    """One measurement, run in this (fresh) process; prints its figures as JSON."""
    tree = _TreePeak()
    started = time.perf_counter()
    store, retriever = _open(engine, corpus, index_dir)
    opened = time.perf_counter() - started
    if phase == "build":
        return {
            "build_s": opened,
            "docs": len(store),
            "peak_mb": tree.stop(),
            "main_peak_mb": peak_mb(),
            "disk_bytes": _folder_bytes(index_dir),
        }
    questions, gold = load_questions(store, limit)
    latencies, results = [], []
    for question in questions:
        t0 = time.perf_counter()
        results.append([hit.article_id for hit in retriever.search(question, 10)])
        latencies.append(time.perf_counter() - t0)
    figures = {
        "open_s": opened,
        "qps": len(questions) / sum(latencies),
        "p50_ms": 1000 * float(np.percentile(latencies, 50)),
        "p99_ms": 1000 * float(np.percentile(latencies, 99)),
        "peak_mb": tree.stop(),
        "questions": len(questions),
        "gold_found": sum(1 for g in gold if g),
    }
    for k in RECALL_AT:
        per_question = [
            len(set(r[:k]) & g) / len(g) for r, g in zip(results, gold, strict=True) if g
        ]
        figures[f"recall@{k}"] = float(np.mean(per_question))
    return figures


def _measure(engine: str, phase: str, corpus: Path, index_dir: Path, limit: int | None) -> dict:
    command = [
        sys.executable,
        "-m",
        "benchmarks.wikipedia_scale",
        "--child",
        engine,
        phase,
        str(corpus),
        str(index_dir),
    ]
    if limit:
        command += ["--limit-questions", str(limit)]
    out = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def agreement(limit: int | None, work: Path) -> dict[str, Any]:
    """Recall of tantivy and of today's bm25s on the FRAMES corpus (articles and distractors)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    store = load_corpus(
        paths.data_file("corpus"),
        aliases=paths.data_file("aliases"),
        distractors=paths.data_file("distractors"),
    )
    folder = work / "frames-corpus"
    folder.mkdir(parents=True)
    columns = {"id": [], "url": [], "title": [], "text": []}
    for article in store.articles:
        columns["id"].append(article.id)
        columns["url"].append(article.url or "")
        columns["title"].append(article.title)
        columns["text"].append(article.text)
    pq.write_table(pa.table(columns), folder / "corpus.parquet")
    questions, gold = load_questions(store, limit)
    row = {"articles": len(store)}
    for engine in ("bm25s", "tantivy"):
        if engine == "bm25s":
            retriever = build_retriever(store, index_dir=work / "bm25s-frames")
        else:
            _, retriever = _open("tantivy", folder, work / "tantivy-frames")
        started = time.perf_counter()
        results = [[h.article_id for h in retriever.search(q, 10)] for q in questions]
        row[f"{engine}_qps"] = len(questions) / (time.perf_counter() - started)
        for k in RECALL_AT:
            found = [len(set(r[:k]) & g) / len(g) for r, g in zip(results, gold, strict=True) if g]
            row[f"{engine}_recall@{k}"] = float(np.mean(found))
        row[f"{engine}_top10"] = results
    overlap = [
        len(set(a) & set(b)) / max(len(a), 1)
        for a, b in zip(row.pop("bm25s_top10"), row.pop("tantivy_top10"), strict=True)
    ]
    row["top10_overlap"] = float(np.mean(overlap))
    return row


def fit(sizes: list[int], values: list[float], *, power: bool) -> tuple[float, str]:
    """The prediction at the snapshot's size: linear a + b*n, or a power law a * n^c."""
    x, y = np.asarray(sizes, float), np.asarray(values, float)
    if power:
        c, log_a = np.polyfit(np.log(x), np.log(y), 1)
        return float(np.exp(log_a) * SNAPSHOT_ARTICLES**c), f"n^{c:.2f}"
    b, a = np.polyfit(x, y, 1)
    return float(a + b * SNAPSHOT_ARTICLES), "linear"


def _markdown(rows: list[dict], predictions: dict) -> str:
    lines = [
        "| engine | articles | build s | articles/s | build peak MiB | disk MiB | query peak MiB "
        "| QPS | p50 ms | p99 ms | R@2 | R@4 | R@10 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['engine']}{' (query re-measured)' if r.get('requeried') else ''} "
            f"| {r['docs']:,} | {r['build_s']:.0f} "
            f"| {r['docs'] / r['build_s']:,.0f} | {r['build_peak_mb']:,.0f} "
            f"| {r['disk_bytes'] / 2**20:,.0f} | {r['query_peak_mb']:,.0f} "
            f"| {r['qps']:.1f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} "
            f"| {r['recall@2']:.3f} | {r['recall@4']:.3f} | {r['recall@10']:.3f} |"
        )
    if predictions:
        p = predictions
        lines.append(
            f"| tantivy, fitted | {SNAPSHOT_ARTICLES:,} | {p['build_s'][0]:,.0f} | "
            f"{SNAPSHOT_ARTICLES / p['build_s'][0]:,.0f} | {p['build_peak_mb'][0]:,.0f} | "
            f"{p['disk_bytes'][0] / 2**20:,.0f} | {p['query_peak_mb'][0]:,.0f} | "
            f"{1000 / p['p50_ms'][0]:.1f}* | {p['p50_ms'][0]:.1f} | {p['p99_ms'][0]:.1f} | | | |"
        )
    return "\n".join(lines)


def run(corpora: list[Path], *, bm25s_max: int, limit: int | None, do_agreement: bool) -> dict:
    record: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "processor": platform.processor() or platform.machine(),
        },
        "date": time.strftime("%Y-%m-%d"),
        "rows": [],
    }
    work = Path(tempfile.mkdtemp(prefix="wiki-bench-"))
    try:
        if do_agreement:
            record["agreement"] = agreement(limit, work)
            print(json.dumps(record["agreement"]), file=sys.stderr)
        for corpus in corpora:
            docs = json.loads((corpus / "generated.json").read_text())["articles"]
            for engine in ENGINES:
                if engine != "tantivy" and docs > bm25s_max:
                    continue
                index_dir = work / f"{engine}-{docs}"
                if engine == "bm25s-mmap":  # the same saved index, reopened memory-mapped
                    index_dir = work / f"bm25s-{docs}"
                    build = dict(record["rows"][-1])
                else:
                    build = _measure(engine, "build", corpus, index_dir, limit)
                query = _measure(engine, "query", corpus, index_dir, limit)
                row = {
                    "engine": engine,
                    "docs": docs,
                    "build_s": build["build_s"],
                    "build_peak_mb": build.get("peak_mb", build.get("build_peak_mb")),
                    "build_main_peak_mb": build.get(
                        "main_peak_mb", build.get("build_main_peak_mb")
                    ),
                    "disk_bytes": build["disk_bytes"],
                    "query_peak_mb": query["peak_mb"],
                    **{k: v for k, v in query.items() if k != "peak_mb"},
                }
                record["rows"].append(row)
                print(json.dumps(row), file=sys.stderr)
            shutil.rmtree(work / f"tantivy-{docs}", ignore_errors=True)
            shutil.rmtree(work / f"bm25s-{docs}", ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return finish(record)


def finish(record: dict) -> dict:
    """The fitted predictions and the markdown table of a record's rows."""
    tantivy = [r for r in record["rows"] if r["engine"] == "tantivy"]
    if len(tantivy) >= 2:
        sizes = [r["docs"] for r in tantivy]
        record["predictions"] = {
            metric: fit(sizes, [r[metric] for r in tantivy], power=metric.endswith("_ms"))
            for metric in (
                "build_s",
                "build_peak_mb",
                "disk_bytes",
                "query_peak_mb",
                "p50_ms",
                "p99_ms",
            )
        }
    record["markdown"] = _markdown(record["rows"], record.get("predictions", {}))
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpora",
        type=Path,
        nargs="*",
        default=[],
        help="folders made by benchmarks.synthetic_wikipedia, smallest first",
    )
    parser.add_argument(
        "--bm25s-max",
        type=int,
        default=300_000,
        help="measure bm25s only up to this many articles (default %(default)s)",
    )
    parser.add_argument("--limit-questions", type=int, default=None)
    parser.add_argument(
        "--agreement",
        action="store_true",
        help="compare tantivy with bm25s on the FRAMES corpus first",
    )
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    parser.add_argument(
        "--requery",
        nargs=3,
        type=Path,
        metavar=("JSON", "CORPUS", "INDEX_DIR"),
        help="measure tantivy's query phase again on an index already built in INDEX_DIR (e.g. "
        "the user cache's indexes/) for CORPUS, update that row of a saved JSON, refit",
    )
    parser.add_argument(
        "--child", nargs=4, metavar=("ENGINE", "PHASE", "CORPUS", "INDEX"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if paths.data_file("dataset") is None:
        parser.error("set FRAMES_DATA_DIR to the offline data folder (../shared/data/raw)")
    if args.requery:
        record = json.loads(args.requery[0].read_text("utf-8"))
        record = _requery(record, args.requery[1], args.requery[2], args.limit_questions)
        if args.json:
            args.json.write_text(json.dumps(record, indent=1), "utf-8")
        return _print(record)
    if args.child:
        engine, phase, corpus, index_dir = args.child
        print(
            json.dumps(_child(engine, phase, Path(corpus), Path(index_dir), args.limit_questions))
        )
        return 0
    record = run(
        args.corpora,
        bm25s_max=args.bm25s_max,
        limit=args.limit_questions,
        do_agreement=args.agreement,
    )
    if args.json:
        args.json.write_text(json.dumps(record, indent=1), "utf-8")
    return _print(record)


def _requery(record: dict, corpus: Path, index_dir: Path, limit: int | None) -> dict:
    """Measure the query phase again on an index already built (e.g. by a run into the user
    cache); the row of that engine and size keeps its build figures and takes the new ones."""
    query = _measure("tantivy", "query", corpus, index_dir, limit)
    docs = json.loads((corpus / "generated.json").read_text())["articles"]
    for row in record["rows"]:
        if row["engine"] == "tantivy" and row["docs"] == docs:
            row.update({"query_peak_mb": query.pop("peak_mb"), **query, "requeried": True})
    return finish(record)


def _print(record: dict) -> int:
    print(record["markdown"])
    if "agreement" in record:
        a = record["agreement"]
        print(
            "\nFRAMES corpus ({:,} articles), recall@2/4/10: bm25s {:.3f}/{:.3f}/{:.3f}, "
            "tantivy {:.3f}/{:.3f}/{:.3f}; top-10 overlap {:.2f}; "
            "QPS bm25s {:.0f}, tantivy {:.0f}".format(
                a["articles"],
                *(a[f"bm25s_recall@{k}"] for k in RECALL_AT),
                *(a[f"tantivy_recall@{k}"] for k in RECALL_AT),
                a["top10_overlap"],
                a["bm25s_qps"],
                a["tantivy_qps"],
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
