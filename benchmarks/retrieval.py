"""Retrieval speed, quality and scale: bm25s against rank-bm25, measured in the same run.

Run ``python -m benchmarks.retrieval [--json] [--scale-docs N] [--limit-questions N]`` with
``FRAMES_DATA_DIR`` pointing at the offline data (FRAMES articles plus distractor summaries).

What it measures:

* per backend: index build (+ save) seconds, load-from-disk seconds, single-thread queries per
  second over the FRAMES questions, gold-article recall@2/4/10 with the question as the query
  (the paper's BM25-R setting);
* the bm25s / rank-bm25 speed ratio and the top-10 overlap of the two backends (same tokens);
* a scale run of bm25s alone on a synthetic corpus of passages cut from the real articles
  (default 1,000,000): build, load, memory-mapped load, qps and peak memory, plus the resident
  memory of a fresh process that loads the index with and without ``mmap``.

Every index is built in a temporary folder that is removed at the end, so builds are real builds.
"""

from __future__ import annotations

import argparse
import bisect
import csv
import json
import logging
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from frames_dspy.base import paths
from frames_dspy.data.corpus import Article, ArticleStore, load_corpus
from frames_dspy.data.links import extract_links
from frames_dspy.retrieval.bm25 import BACKENDS, Hit, build_retriever

logger = logging.getLogger("benchmarks.retrieval")

RECALL_AT = (2, 4, 10)


@dataclass
class BenchConfig:
    """Knobs of one benchmark run.

    Attributes:
        scale_docs: Passages in the synthetic scale corpus; 0 skips the scale run.
        limit_questions: Use only the first N FRAMES questions (None = all 824).
        seed: Seed of the random.Random that cuts and shuffles the scale passages.
        passage_words: Inclusive (min, max) passage length in words for the scale corpus.
        index_dir: Where indexes are built; None = a temporary folder removed afterwards.
    """

    scale_docs: int = 1_000_000
    limit_questions: int | None = None
    seed: int = 0
    passage_words: tuple[int, int] = (40, 120)
    index_dir: str | None = None


# -- memory ------------------------------------------------------------------------------------


def _status_kb(field: str) -> float | None:
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def rss_mb() -> float | None:
    """Current resident memory of this process (Linux), in MiB."""
    kb = _status_kb("VmRSS")
    return None if kb is None else kb / 1024


def reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark to the current RSS (Linux >= 4.0); False if unsupported."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def peak_mb() -> float:
    """Peak resident memory since the last :func:`reset_peak` (or process start), in MiB."""
    kb = _status_kb("VmHWM")
    if kb is None:  # not Linux: the lifetime peak is the best we have
        kb = float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return kb / 1024


# -- data --------------------------------------------------------------------------------------


def load_questions(store: ArticleStore, limit: int | None) -> tuple[list[str], list[set[str]]]:
    """FRAMES questions and the ids of their gold articles found in the store."""
    dataset = paths.data_file("dataset")
    if dataset is None:
        raise SystemExit("set FRAMES_DATA_DIR to the offline data folder (../shared/data/raw)")
    with dataset.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    rows = rows[:limit] if limit is not None else rows
    questions = [row["Prompt"].strip() for row in rows]
    gold = []
    for row in rows:
        cells = [row["wiki_links"]] + [v for k, v in row.items() if k.startswith("wikipedia_link")]
        links = [link for cell in cells for link in extract_links(cell)]
        gold.append({article.id for article in store.resolve_many(links)})
    return questions, gold


def scale_corpus(store: ArticleStore, n_docs: int, *, seed: int, words: tuple[int, int]):
    """``n_docs`` passages cut at random places from the store's articles, in shuffled order.

    Each passage is a run of ``words`` (min..max) consecutive words of one article, the article
    drawn with probability proportional to its length, so long articles give more passages. The
    passages are drawn independently, hence already in random order.
    """
    rng = random.Random(seed)
    texts = [article.text.split() for article in store.articles]
    cumulative, total = [], 0
    for tokens in texts:
        total += len(tokens)
        cumulative.append(total)
    low, high = words
    articles = []
    for i in range(n_docs):
        source = bisect.bisect_right(cumulative, rng.random() * total)
        tokens = texts[source]
        length = rng.randint(low, high)
        start = rng.randrange(max(1, len(tokens) - length + 1))
        title = store.articles[source].title
        articles.append(Article(f"p{i:07d}", title, " ".join(tokens[start : start + length])))
    return ArticleStore(articles)


# -- measurements ------------------------------------------------------------------------------


def timed(fn, *args, **kwargs) -> tuple[Any, float]:
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - started


def recall(results: list[list[Hit]], gold: list[set[str]], k: int) -> float:
    """Mean over questions with a resolved gold article of |top-k ∩ gold| / |gold|."""
    values = [
        len({hit.article_id for hit in hits[:k]} & wanted) / len(wanted)
        for hits, wanted in zip(results, gold, strict=True)
        if wanted
    ]
    return sum(values) / len(values) if values else float("nan")


def overlap(a: list[list[Hit]], b: list[list[Hit]], k: int = 10) -> dict[str, float]:
    """How alike two backends' top-k lists are."""
    inter, jaccard, same_set, same_top1 = [], [], 0, 0
    for hits_a, hits_b in zip(a, b, strict=True):
        set_a = {h.article_id for h in hits_a[:k]}
        set_b = {h.article_id for h in hits_b[:k]}
        inter.append(len(set_a & set_b) / k)
        jaccard.append(len(set_a & set_b) / len(set_a | set_b) if set_a | set_b else 1.0)
        same_set += set_a == set_b
        same_top1 += bool(hits_a and hits_b and hits_a[0].article_id == hits_b[0].article_id)
    n = len(inter)
    return {
        "mean_intersection_over_k": sum(inter) / n,
        "mean_jaccard": sum(jaccard) / n,
        "identical_top10_fraction": same_set / n,
        "same_top1_fraction": same_top1 / n,
    }


def measure_backend(
    store: ArticleStore, backend: str, questions: list[str], gold: list[set[str]], index_dir: Path
) -> tuple[dict[str, Any], list[list[Hit]]]:
    """Build, reload and query one backend; returns its figures and its top-10 lists."""
    logger.info("%s: building over %d articles", backend, len(store))
    _, build_s = timed(build_retriever, store, backend=backend, index_dir=index_dir)
    logger.info("%s: loading from disk", backend)
    retriever, load_s = timed(build_retriever, store, backend=backend, index_dir=index_dir)
    logger.info("%s: answering %d questions", backend, len(questions))
    results, search_s = timed(retriever.search_many, questions, 10)
    figures = {
        "build_s": build_s,
        "load_s": load_s,
        "qps": len(questions) / search_s,
        "query_s": search_s,
        **{f"recall@{k}": recall(results, gold, k) for k in RECALL_AT},
    }
    if backend == "bm25s":
        # One call per question too, as a program asking one query at a time would.
        _, single_s = timed(lambda: [retriever.search(q, 10) for q in questions])
        figures["qps_one_call_per_query"] = len(questions) / single_s
    return figures, results


_PROBE = """
import json, sys, time
import bm25s

def status_mb(field):
    # VmHWM/VmRSS of this process; ru_maxrss would carry the parent's peak across fork+exec.
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024

path, mmap, queries_file = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
queries = json.load(open(queries_file))
before = status_mb("VmRSS")
started = time.perf_counter()
model = bm25s.BM25.load(path, mmap=mmap, show_progress=False)
load_s = time.perf_counter() - started
after_load = status_mb("VmHWM")
vocab = model.vocab_dict
ids = [[vocab[t] for t in q if t in vocab] for q in queries]
ids = [q for q in ids if q]
started = time.perf_counter()
model.retrieve(ids, k=10, show_progress=False, n_threads=0)
query_s = time.perf_counter() - started
print(json.dumps({"load_s": load_s, "qps": len(ids) / query_s, "rss_before_load_mb": before,
                  "peak_rss_after_load_mb": after_load,
                  "peak_rss_after_queries_mb": status_mb("VmHWM")}))
"""


def probe_fresh_process(folder: Path, questions: list[str], *, mmap: bool) -> dict[str, Any]:
    """Load a saved bm25s index in a new Python process and report its time and memory."""
    from frames_dspy.retrieval.bm25 import tokenize

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(tokenize(questions), handle)
    try:
        out = subprocess.run(
            [sys.executable, "-c", _PROBE, str(folder), "1" if mmap else "0", handle.name],
            check=True,
            capture_output=True,
            text=True,
        )
    finally:
        os.unlink(handle.name)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_scale(
    store: ArticleStore, config: BenchConfig, questions: list[str], index_dir: Path
) -> dict[str, Any]:
    """bm25s on a large synthetic passage corpus: build, load, mmap load, qps and memory."""
    logger.info("scale: cutting %d passages", config.scale_docs)
    reset_peak()
    rss_start = rss_mb()
    big, cut_s = timed(scale_corpus, store, config.scale_docs, seed=config.seed,
                       words=config.passage_words)  # fmt: skip
    n_words = sum(len(a.text.split()) for a in big.articles[:10_000]) / min(10_000, len(big))
    rss_corpus = rss_mb()
    _, fingerprint_s = timed(lambda: big.fingerprint)
    logger.info("scale: building bm25s over %d passages", len(big))
    rss_before_build = rss_mb()
    reset_peak()
    built, build_s = timed(build_retriever, big, backend="bm25s", index_dir=index_dir)
    build_peak = peak_mb()
    folder = built.index_path
    index_bytes = sum(p.stat().st_size for p in folder.iterdir())
    del built
    logger.info("scale: loading from disk")
    loaded, load_s = timed(build_retriever, big, backend="bm25s", index_dir=index_dir)
    logger.info("scale: answering %d questions", len(questions))
    _, query_s = timed(loaded.search_many, questions, 10)
    del loaded
    logger.info("scale: memory-mapped load")
    mapped, mmap_load_s = timed(
        build_retriever, big, backend="bm25s", index_dir=index_dir, mmap=True
    )
    _, mmap_query_s = timed(mapped.search_many, questions, 10)
    del mapped
    logger.info("scale: fresh-process loads")
    fresh = {
        "in_memory": probe_fresh_process(folder, questions, mmap=False),
        "mmap": probe_fresh_process(folder, questions, mmap=True),
    }
    return {
        "docs": len(big),
        "mean_words_per_doc": n_words,
        "cut_s": cut_s,
        "fingerprint_s": fingerprint_s,
        "corpus_rss_mb": (rss_corpus - rss_start) if rss_start and rss_corpus else None,
        "build_s": build_s,
        "rss_before_build_mb": rss_before_build,
        "build_peak_rss_mb": build_peak,
        "index_mb_on_disk": index_bytes / 2**20,
        "load_s": load_s,
        "qps": len(questions) / query_s,
        "mmap_load_s": mmap_load_s,
        "mmap_qps": len(questions) / mmap_query_s,
        "fresh_process": fresh,
    }


def run(config: BenchConfig) -> dict[str, Any]:
    """Every measurement of one run, as a JSON-ready dict."""
    corpus_file = paths.data_file("corpus")
    if corpus_file is None:
        raise SystemExit("set FRAMES_DATA_DIR to the offline data folder (../shared/data/raw)")
    store, corpus_s = timed(
        load_corpus,
        corpus_file,
        aliases=paths.data_file("aliases"),
        distractors=paths.data_file("distractors"),
    )
    questions, gold = load_questions(store, config.limit_questions)
    owned = config.index_dir is None
    index_dir = Path(config.index_dir or tempfile.mkdtemp(prefix="frames-bench-indexes-"))
    try:
        backends, results = {}, {}
        for backend in BACKENDS:
            backends[backend], results[backend] = measure_backend(
                store, backend, questions, gold, index_dir
            )
        report: dict[str, Any] = {
            "config": asdict(config),
            "environment": {
                "python": platform.python_version(),
                "machine": platform.machine(),
                "cpus": os.cpu_count(),
                **{pkg: version(pkg) for pkg in ("bm25s", "rank-bm25", "numpy", "PyStemmer")},
            },
            "corpus": {
                "articles": len(store),
                "frames_articles": sum(a.source == "frames" for a in store.articles),
                "distractors": sum(a.source == "distractor" for a in store.articles),
                "load_s": corpus_s,
                "questions": len(questions),
                "questions_with_gold": sum(bool(g) for g in gold),
                "mean_gold_per_question": sum(map(len, gold)) / len(gold),
            },
            "backends": backends,
            "qps_ratio_bm25s_over_rank_bm25": backends["bm25s"]["qps"]
            / backends["rank-bm25"]["qps"],
            "top10_overlap": overlap(results["bm25s"], results["rank-bm25"]),
        }
        if config.scale_docs > 0:
            report["scale_bm25s"] = measure_scale(store, config, questions, index_dir)
        return report
    finally:
        if owned:
            shutil.rmtree(index_dir, ignore_errors=True)


# -- output ------------------------------------------------------------------------------------


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def render(report: dict[str, Any]) -> str:
    """A readable plain-text table of a report from :func:`run`."""
    corpus, env = report["corpus"], report["environment"]
    lines = [
        "Retrieval benchmark: bm25s vs rank-bm25 (whole articles, question as the query)",
        f"python {env['python']} on {env['cpus']} CPUs; bm25s {env['bm25s']}, "
        f"rank-bm25 {env['rank-bm25']}, numpy {env['numpy']}, PyStemmer {env['PyStemmer']}",
        f"corpus: {corpus['articles']:,} articles ({corpus['frames_articles']:,} FRAMES + "
        f"{corpus['distractors']:,} distractor summaries), loaded in {corpus['load_s']:.2f} s",
        f"questions: {corpus['questions']} ({corpus['questions_with_gold']} with gold articles, "
        f"{corpus['mean_gold_per_question']:.2f} gold per question)",
        "",
        f"{'backend':<10} {'build s':>9} {'load s':>8} {'qps':>10} "
        + " ".join(f"{'R@' + str(k):>7}" for k in RECALL_AT),
    ]
    for name, fig in report["backends"].items():
        lines.append(
            f"{name:<10} {fig['build_s']:>9.2f} {fig['load_s']:>8.2f} {fig['qps']:>10,.1f} "
            + " ".join(f"{fig[f'recall@{k}']:>7.3f}" for k in RECALL_AT)
        )
    bm = report["backends"]["bm25s"]
    ov = report["top10_overlap"]
    lines += [
        "",
        f"qps ratio bm25s / rank-bm25: {report['qps_ratio_bm25s_over_rank_bm25']:,.0f}x "
        f"(bm25s one call per query: {bm['qps_one_call_per_query']:,.0f} qps)",
        f"top-10 overlap: mean |A∩B|/10 {ov['mean_intersection_over_k']:.3f}, "
        f"mean Jaccard {ov['mean_jaccard']:.3f}, identical top-10 sets "
        f"{ov['identical_top10_fraction']:.1%}, same top-1 {ov['same_top1_fraction']:.1%}",
        "(build s includes tokenising and saving; load s includes the manifest check)",
    ]
    scale = report.get("scale_bm25s")
    if scale:
        fresh = scale["fresh_process"]
        lines += [
            "",
            f"Scale run, bm25s only: {scale['docs']:,} passages "
            f"(~{scale['mean_words_per_doc']:.0f} words each, cut in {scale['cut_s']:.1f} s, "
            f"corpus RSS {_fmt(scale['corpus_rss_mb'], 0)} MiB)",
            f"  build + save      {scale['build_s']:>9.1f} s   peak RSS during build "
            f"{scale['build_peak_rss_mb']:,.0f} MiB "
            f"(from {_fmt(scale['rss_before_build_mb'], 0)}); "
            f"index on disk {scale['index_mb_on_disk']:,.0f} MiB",
            f"  load              {scale['load_s']:>9.2f} s   {scale['qps']:>8,.1f} qps",
            f"  load (mmap)       {scale['mmap_load_s']:>9.2f} s   {scale['mmap_qps']:>8,.1f} qps",
            "  fresh process, bm25s.BM25.load only (RSS includes the interpreter and numpy):",
        ]
        for mode, fig in fresh.items():
            lines.append(
                f"    {mode:<10} load {fig['load_s']:>6.2f} s, {fig['qps']:>7,.1f} qps, "
                f"peak {fig['peak_rss_after_load_mb']:,.0f} MiB after load, "
                f"{fig['peak_rss_after_queries_mb']:,.0f} MiB after queries"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--scale-docs",
        type=int,
        default=BenchConfig.scale_docs,
        help="passages in the bm25s scale run (0 skips it; default %(default)s)",
    )
    parser.add_argument(
        "--limit-questions", type=int, default=None, help="use only the first N questions"
    )
    parser.add_argument("--seed", type=int, default=BenchConfig.seed, help="scale-corpus seed")
    parser.add_argument(
        "--index-dir",
        default=None,
        help="build indexes here; existing ones are reused, so builds become loads "
        "(default: a fresh temporary folder, removed afterwards)",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help=f"offline data folder (default: ${paths.DATA_DIR_ENV}, e.g. ../shared/data/raw)",
    )
    args = parser.parse_args(argv)
    if args.data_dir:
        os.environ[paths.DATA_DIR_ENV] = args.data_dir
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    config = BenchConfig(
        scale_docs=args.scale_docs,
        limit_questions=args.limit_questions,
        seed=args.seed,
        index_dir=args.index_dir,
    )
    report = run(config)
    print(json.dumps(report, indent=2) if args.json else render(report))


if __name__ == "__main__":
    main()
