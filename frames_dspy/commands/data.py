"""``python -m frames_dspy.data``: a summary of a FRAMES dataset and its corpus coverage."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from frames_dspy.base.paths import data_file
from frames_dspy.commands.common import add_output_arguments, add_settings
from frames_dspy.data.corpus import CorpusError
from frames_dspy.data.download import DownloadError
from frames_dspy.data.questions import DatasetError, load_frames, summarize
from frames_dspy.run.session import open_store
from frames_dspy.run.settings import ModelDataSettings

#: The program name its help and errors show; ``frames-dspy data`` passes its own.
PROG = "python -m frames_dspy.data"


def _print_summary(summary: dict) -> None:
    print(f"rows: {summary['rows']}")
    print("reasoning types:")
    for name, count in summary["reasoning_types"].items():
        print(f"  {name:<22} {count:>5}")
    apq = summary["articles_per_question"]
    print(
        f"articles per question: min {apq['min']}, median {apq['median']}, "
        f"mean {apq['mean']}, max {apq['max']}"
    )
    print(f"unique normalised links: {summary['unique_links']}")
    if "corpus" in summary:
        c = summary["corpus"]
        print(f"corpus articles: {c['articles']}")
        print(
            f"links with an article: {c['links_resolved']} / {summary['unique_links']} "
            f"({c['link_coverage']:.1%})"
        )
        print(
            f"questions with every article present: {c['questions_fully_covered']} / "
            f"{summary['rows']}"
        )


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def main(argv: Sequence[str] | None = None, *, prog: str = PROG) -> int:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Summarise the FRAMES dataset and, with a corpus, how much of it is covered.",
    )
    add_settings(parser, ModelDataSettings, "data", groups=("data",), section="options")
    parser.add_argument(
        "--corpus",
        default=None,
        help="articles as JSONL(.gz) to measure link coverage (e.g. frames_wiki/pages.jsonl.gz; "
        "'default' = the one under $FRAMES_DATA_DIR), or a Wikipedia snapshot ('wikipedia', "
        "'wikipedia:SNAPSHOT', a parquet file or folder), indexed once if it is not yet",
    )
    parser.add_argument(
        "--aliases",
        default=None,
        help="link -> page_id TSV for redirects "
        "(default: frames_link_to_page.tsv beside the corpus)",
    )
    add_output_arguments(parser, "data")
    args = parser.parse_args(argv)
    try:
        examples = load_frames(args.dataset, revision=args.revision)
        store = None
        if args.corpus:
            corpus = data_file("corpus") if args.corpus == "default" else args.corpus
            if corpus is None:
                parser.error("--corpus default needs FRAMES_DATA_DIR to be set")
            store = open_store(corpus, aliases=args.aliases, say=_stderr)
    except (DatasetError, CorpusError, DownloadError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted (an index being built resumes on the next run)", file=sys.stderr)
        return 130
    summary = summarize(examples, store)
    summary["dataset"] = str(args.dataset)
    if args.json:
        print(json.dumps(summary))
    else:
        _print_summary(summary)
    return 0
