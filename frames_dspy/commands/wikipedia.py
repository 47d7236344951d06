"""``python -m frames_dspy.wikipedia fetch``: the article corpus from live Wikipedia.

The command line over :mod:`frames_dspy.data.mediawiki`, which does the fetching.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from frames_dspy.base.locks import FolderInUse
from frames_dspy.base.redaction import redact_text
from frames_dspy.commands.common import add_output_arguments, add_settings
from frames_dspy.data.download import DownloadError
from frames_dspy.data.mediawiki import DEFAULT_DELAY, fetch_corpus
from frames_dspy.data.questions import DatasetError, load_frames
from frames_dspy.run.settings import ModelDataSettings

#: The program name its help and errors show; ``frames-dspy wikipedia`` passes its own.
PROG = "python -m frames_dspy.wikipedia"


def main(argv: list[str] | None = None, *, prog: str = PROG) -> int:
    """``python -m frames_dspy.wikipedia fetch``: build a corpus file from live Wikipedia."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Build the article corpus for FRAMES from Wikipedia (needs internet). "
        "Downloads the plain text of every article the dataset links to through the MediaWiki "
        "API, one cached file per link (an interrupted run resumes), then writes "
        "OUT/pages.jsonl.gz, OUT/frames_link_to_page.tsv and OUT/manifest.json. The evaluate "
        "and compile commands do this by themselves, into the user cache, when no corpus is "
        "given.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    fetch = sub.add_parser("fetch", help="download the gold articles and write pages.jsonl.gz")
    add_settings(fetch, ModelDataSettings, "wikipedia", groups=("data",), section="options")
    fetch.add_argument("--out", required=True, help="folder for cache/ and pages.jsonl.gz")
    fetch.add_argument(
        "--delay",
        type=float,
        default=DEFAULT_DELAY,
        help="seconds between requests (default %(default)s)",
    )
    fetch.add_argument(
        "--api-url",
        default=None,
        help="a MediaWiki API endpoint (default: https://<link host>/w/api.php)",
    )
    fetch.add_argument("--limit", type=int, default=None, help="only the first N questions")
    add_output_arguments(fetch, "wikipedia")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    try:
        examples = load_frames(args.dataset)[: args.limit]
        out = Path(args.out)
        manifest = fetch_corpus(
            (url for ex in examples for url in ex.gold_urls),
            out,
            say=print,
            api_url=args.api_url,
            delay=args.delay,
            progress=not args.quiet,
        )
    except (DatasetError, DownloadError, FolderInUse) as err:
        print(f"error: {redact_text(str(err))}", file=sys.stderr)
        return 2
    print(
        f"wrote {manifest['articles']} articles to {out / 'pages.jsonl.gz'} "
        f"({manifest['unresolved_links']} links found no article, see {out / 'manifest.json'}); "
        f"use --corpus {out / 'pages.jsonl.gz'}"
    )
    return 0
