"""A synthetic Wikipedia snapshot (``wikimedia/wikipedia``'s schema), FRAMES articles planted.

This machine cannot download the 6.4-million-article snapshot, so the on-disk index is measured
on generated ones of growing size. Each generated article:

* has a length drawn from the FRAMES articles' word counts, scaled so the mean is
  ``--mean-words`` (default 520: the snapshot's ~20 GB of text over 6.4M articles is about 3,100
  characters, ~520 words, an article; the FRAMES articles are the long, well-linked ones, 23,000
  characters on average, and would make a corpus four times the snapshot's size);
* takes 70% of its words from the FRAMES articles' own word frequencies (a Zipf-like law) and
  30% from one FRAMES article picked as its topic, so it shares vocabulary with real articles the
  way a neighbouring Wikipedia article would;
* adds rare made-up words at 2% of tokens with Zipf-distributed ranks, so the vocabulary keeps
  growing with the corpus (Heaps' law), as a real snapshot's does.

The 2,460 FRAMES articles (``frames_wiki/pages.jsonl.gz``) are planted at random rows under their
own titles, so FRAMES questions have their gold articles in the haystack.

Usage::

    python -m benchmarks.synthetic_wikipedia --articles 1000000 --out /tmp/wiki-1m
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections import Counter
from multiprocessing import Pool
from pathlib import Path

import numpy as np

from frames_dspy.base import paths

__all__ = ["generate"]

TOPIC_SHARE = 0.3
RARE_SHARE = 0.02
ROWS_PER_FILE = 100_000
ROW_GROUP = 10_000


def _frames_pages(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


class _Model:
    """What every worker samples from: the word law, the topics, the length law."""

    def __init__(self, pages: list[dict], mean_words: float) -> None:
        counts = Counter(word for page in pages for word in page["text"].split())
        self.words = np.array(list(counts), dtype=object)
        freq = np.array(list(counts.values()), dtype=np.float64)
        self.cdf = np.cumsum(freq / freq.sum())
        self.index = {word: i for i, word in enumerate(self.words)}
        self.topics = [
            np.array([self.index[w] for w in page["text"].split()], dtype=np.int64)
            for page in pages
        ]
        lengths = np.array([max(len(t), 1) for t in self.topics], dtype=np.float64)
        self.lengths = lengths * (mean_words / lengths.mean())


def _rare_word(rank: int) -> str:
    digits = np.base_repr(int(rank), 36).lower()
    return "q" + digits + "x"


_MODEL: _Model | None = None


def _init(pages_path: str, mean_words: float) -> None:
    global _MODEL
    _MODEL = _Model(_frames_pages(Path(pages_path)), mean_words)


def _article(model: _Model, rng: np.random.Generator) -> str:
    n = max(20, int(model.lengths[rng.integers(len(model.lengths))]))
    topic = model.topics[rng.integers(len(model.topics))]
    n_topic = int(n * TOPIC_SHARE)
    n_rare = int(n * RARE_SHARE)
    common = np.searchsorted(model.cdf, rng.random(n - n_topic - n_rare))
    picked = np.concatenate([common, topic[rng.integers(len(topic), size=n_topic)]])
    words = model.words[np.minimum(picked, len(model.words) - 1)].tolist()
    words += [_rare_word(r) for r in rng.zipf(1.3, size=n_rare)]
    order = rng.permutation(len(words))
    return " ".join(words[i] for i in order)


def _write_part(args: tuple) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    part, start, stop, planted, seed, out = args
    model = _MODEL
    rng = np.random.default_rng([seed, part])
    pages = {row: page for row, page in planted}
    schema = pa.schema([(c, pa.string()) for c in ("id", "url", "title", "text")])
    with pq.ParquetWriter(Path(out) / f"part-{part:05d}.parquet", schema) as writer:
        for group in range(start, stop, ROW_GROUP):
            rows = range(group, min(group + ROW_GROUP, stop))
            columns: dict[str, list[str]] = {"id": [], "url": [], "title": [], "text": []}
            for row in rows:
                if row in pages:
                    title, text = pages[row]["title"], pages[row]["text"]
                else:
                    a, b = model.words[rng.integers(len(model.words), size=2)]
                    title = (
                        f"{str(a).strip('.,;:()').title()} {str(b).strip('.,;:()').title()} {row}"
                    )
                    text = _article(model, rng)
                columns["id"].append(str(1_000_000 + row))
                columns["url"].append("https://en.wikipedia.org/wiki/" + title.replace(" ", "_"))
                columns["title"].append(title)
                columns["text"].append(text)
            writer.write_table(pa.table(columns, schema=schema))
    return stop - start


def generate(
    n_articles: int,
    out: Path,
    *,
    pages_path: Path,
    mean_words: float = 520.0,
    seed: int = 0,
    workers: int = 2,
) -> dict:
    """Write ``n_articles`` rows (the FRAMES articles among them) as parquet files in ``out``."""
    pages = _frames_pages(pages_path)
    if n_articles < len(pages):
        raise ValueError(f"--articles {n_articles} is fewer than the {len(pages)} FRAMES articles")
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    rows = rng.choice(n_articles, size=len(pages), replace=False)
    planted = sorted(zip(rows.tolist(), pages, strict=True), key=lambda pair: pair[0])
    jobs = []
    for part, start in enumerate(range(0, n_articles, ROWS_PER_FILE)):
        stop = min(start + ROWS_PER_FILE, n_articles)
        mine = [
            (r, {"title": p["title"], "text": p["text"]}) for r, p in planted if start <= r < stop
        ]
        jobs.append((part, start, stop, mine, seed, str(out)))
    started = time.perf_counter()
    with Pool(workers, initializer=_init, initargs=(str(pages_path), mean_words)) as pool:
        written = 0
        for n in pool.imap_unordered(_write_part, jobs):
            written += n
            print(f"\r{written:,} / {n_articles:,} articles", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    record = {
        "articles": n_articles,
        "planted": len(pages),
        "mean_words": mean_words,
        "seed": seed,
        "seconds": round(time.perf_counter() - started, 1),
        "bytes": sum(f.stat().st_size for f in out.glob("*.parquet")),
    }
    (out / "generated.json").write_text(json.dumps(record, indent=1), "utf-8")
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--articles", type=int, required=True, help="rows to write")
    parser.add_argument("--out", type=Path, required=True, help="folder for the parquet files")
    parser.add_argument(
        "--pages",
        type=Path,
        default=None,
        help="frames_wiki/pages.jsonl.gz (default: under $FRAMES_DATA_DIR)",
    )
    parser.add_argument("--mean-words", type=float, default=520.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    pages = args.pages or paths.data_file("corpus")
    if pages is None:
        parser.error("no FRAMES articles: pass --pages or set FRAMES_DATA_DIR")
    record = generate(
        args.articles,
        args.out,
        pages_path=pages,
        mean_words=args.mean_words,
        seed=args.seed,
        workers=args.workers,
    )
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
