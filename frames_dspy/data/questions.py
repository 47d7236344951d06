"""FRAMES loading, reasoning types and seeded splits.

``load_frames`` reads the benchmark from the Hugging Face hub (``google/frames-benchmark``'s
``test.tsv``) or from a local ``.tsv``/``.csv`` copy and returns ``dspy.Example`` objects.
``split_frames`` makes reproducible train/dev/test splits stratified by reasoning type.
``python -m frames_dspy.data`` (:mod:`frames_dspy.data.__main__`) prints a summary of a dataset
and, with a corpus, how much of it the corpus covers.
"""

from __future__ import annotations

import csv
import hashlib
import io
import logging
import random
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import dspy

from frames_dspy.base.paths import HUB_DATASET
from frames_dspy.data import hub
from frames_dspy.data.download import DownloadError
from frames_dspy.data.links import extract_links, link_title

logger = logging.getLogger(__name__)

__all__ = [
    "DatasetError",
    "REASONING_TYPES",
    "Splits",
    "load_frames",
    "dataset_fingerprint",
    "split_frames",
    "summarize",
]

# The five labels as the FRAMES file spells them; a row may carry several, joined by " | ".
REASONING_TYPES = (
    "Numerical reasoning",
    "Tabular reasoning",
    "Multiple constraints",
    "Temporal reasoning",
    "Post processing",
)
_REQUIRED = ("Prompt", "Answer", "reasoning_types")
_ID_COLUMNS = ("id", "", "Unnamed: 0")
#: The file of a hub dataset that holds the questions (google/frames-benchmark's only split).
_HUB_FILE = "test.tsv"
_FILE_SUFFIXES = (".tsv", ".csv", ".json", ".jsonl", ".gz", ".parquet", ".txt", ".xlsx")


class DatasetError(ValueError):
    """A FRAMES file that cannot be used; the message names the file and what is wrong."""


def _link_columns(columns: Iterable[str]) -> list[str]:
    return [c for c in columns if c.startswith("wikipedia_link") or c == "wiki_links"]


def _parse_types(cell: str | None) -> list[str]:
    types = []
    for part in (cell or "").split("|"):
        name = " ".join(part.split())
        if name and name not in types:
            types.append(name)
    return types


def _rows_to_examples(rows: Iterable[Mapping[str, object]], columns: Sequence[str], origin: str):
    missing = [c for c in _REQUIRED if c not in columns]
    link_columns = _link_columns(columns)
    if missing or not link_columns:
        need = missing + ([] if link_columns else ["wikipedia_link_* or wiki_links"])
        raise DatasetError(
            f"{origin} lacks required column(s) {need}; found {list(columns)}. "
            "Expected the FRAMES test.tsv layout "
            "(Prompt, Answer, wikipedia_link_1.., reasoning_types)."
        )
    id_column = next((c for c in _ID_COLUMNS if c in columns), None)
    examples: list[dspy.Example] = []
    seen: dict[int, int] = {}
    for position, row in enumerate(rows):
        raw_id = row.get(id_column) if id_column is not None else None
        try:
            example_id = int(str(raw_id).strip()) if raw_id not in (None, "") else position
        except ValueError:
            raise DatasetError(
                f"{origin}: row {position + 1} has a non-integer id {raw_id!r}"
            ) from None
        if example_id in seen:
            raise DatasetError(
                f"{origin}: id {example_id} appears twice (rows {seen[example_id] + 1} and "
                f"{position + 1}); ids must be unique"
            )
        seen[example_id] = position
        question = " ".join(str(row.get("Prompt") or "").split())
        answer = str(row.get("Answer") or "").strip()
        if not question or not answer:
            raise DatasetError(
                f"{origin}: row {position + 1} (id {example_id}) has an empty "
                f"{'Prompt' if not question else 'Answer'}"
            )
        urls: list[str] = []
        for column in link_columns:
            for link in extract_links(str(row.get(column) or "")):
                url = "https://" + link
                if url not in urls:
                    urls.append(url)
        examples.append(
            dspy.Example(
                id=example_id,
                question=question,
                answer=answer,
                gold_urls=urls,
                gold_titles=[link_title(url) for url in urls],
                reasoning_types=_parse_types(str(row.get("reasoning_types") or "")),
            ).with_inputs("question")
        )
    if not examples:
        raise DatasetError(f"{origin} holds a header but no rows")
    return examples


def _read_local(path: Path, *, origin: str | None = None) -> list[dspy.Example]:
    if not path.is_file():
        raise DatasetError(
            f"dataset file {str(path)!r} does not exist; pass a hub id ({HUB_DATASET!r}), a "
            "local .tsv/.csv, or set FRAMES_DATA_DIR"
        )
    suffix = path.suffix.lower()
    if suffix not in (".tsv", ".csv"):
        raise DatasetError(f"dataset file {str(path)!r} must end in .tsv or .csv")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise DatasetError(
            f"{path} is not UTF-8 text (byte {err.start}: {err.reason}); re-save it as UTF-8"
        ) from err
    if not text.strip():
        raise DatasetError(f"dataset file {path} is empty")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t" if suffix == ".tsv" else ",")
    columns = next(reader)
    rows = []
    start = reader.line_num + 1
    for cells in reader:
        # A short row would otherwise be padded with empty cells and load as a question with
        # missing links, a long one lose its extra cells: count the fields of every row.
        if cells and len(cells) != len(columns):
            raise DatasetError(
                f"{path}, line {start}: expected {len(columns)} fields (as in the header), found "
                f"{len(cells)}; a {'tab' if suffix == '.tsv' else 'comma'} or a quote is missing "
                "or extra in that row"
            )
        if cells:
            rows.append(dict(zip(columns, cells, strict=True)))
        start = reader.line_num + 1
    return _rows_to_examples(rows, columns, origin or str(path))


def load_frames(
    source: str | Path = HUB_DATASET, *, revision: str | None = None
) -> list[dspy.Example]:
    """Load the FRAMES questions.

    Args:
        source: A Hugging Face dataset id (its ``test.tsv``, downloaded into the Hugging Face
            cache the first time) or a local ``.tsv``/``.csv`` file in that layout.
        revision: A hub commit, tag or branch to pin; ignored for local files.

    Returns:
        One ``dspy.Example`` per row with input ``question`` and labels ``answer``, ``id``,
        ``gold_urls`` (normalised, de-duplicated), ``gold_titles`` and ``reasoning_types``.

    Raises:
        DatasetError: the file is missing, empty, not UTF-8, lacks columns or repeats an id.
        DownloadError: the hub cannot be reached and holds no cached copy.
    """
    text = str(source)
    # Anything with a file suffix is a local path (so a typo fails here, not on the network).
    if Path(text).suffix.lower() in _FILE_SUFFIXES or Path(text).expanduser().exists():
        return _read_local(Path(text).expanduser())
    return _read_local(_download_hub_file(text, revision), origin=f"hub dataset {text}")


def _download_hub_file(repo: str, revision: str | None) -> Path:
    """The hub dataset's ``test.tsv`` in the Hugging Face cache, downloaded if need be.

    The hub is checked for a newer file when it can be reached; when it cannot (checked first,
    in seconds, so the hub client's own retry loop never runs offline) a cached copy is used,
    and without one the error says so in one line. A rate limit, a server error or a dropped
    connection that outlasts the client's own retries (five, within seconds) is tried again
    after longer waits (:func:`frames_dspy.data.hub.retrying`).
    """
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    what = f"the FRAMES questions (hub dataset {repo}, file {_HUB_FILE})"
    fix = (
        f"point --dataset at a local copy of {_HUB_FILE} (or a CSV of it), or set "
        "FRAMES_DATA_DIR to a folder holding frames/frames_test_set.csv"
    )
    endpoint = constants.ENDPOINT
    why = hub.unreachable_reason(endpoint)
    logger.info("loading %s (revision %s) from the Hugging Face hub", repo, revision or "main")
    try:
        path = hub.retrying(
            f"downloading {repo}/{_HUB_FILE}",
            lambda: hf_hub_download(
                repo,
                _HUB_FILE,
                repo_type="dataset",
                revision=revision,
                endpoint=endpoint,
                local_files_only=why is not None,
            ),
            waits=None if why is None else (),
        )
    except LocalEntryNotFoundError as err:
        # Not in the cache, and the hub could not be asked (offline, or it kept failing).
        raise DownloadError(what, endpoint, why or hub.reason(err), fix=fix) from err
    except (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError) as err:
        raise DatasetError(
            f"hub dataset {repo!r} (revision {revision or 'main'}) has no {_HUB_FILE}: "
            f"{' '.join(str(err).split())[:200]}; pass a local .tsv/.csv with --dataset"
        ) from err
    except (HfHubHTTPError, OSError) as err:
        raise DownloadError(what, endpoint, why or hub.reason(err), fix=fix) from err
    if why is not None:
        logger.warning("the hub cannot be reached (%s); using the cached copy %s", why, path)
    return Path(path)


def dataset_fingerprint(examples: Sequence[dspy.Example]) -> str:
    """A sha256 over ids, questions and answers: recorded in every run's config."""
    digest = hashlib.sha256()
    for ex in examples:
        digest.update(f"{ex.id}\0{ex.question}\0{ex.answer}\0".encode())
    return digest.hexdigest()


class Splits(NamedTuple):
    """Disjoint train/dev/test lists of examples."""

    train: list[dspy.Example]
    dev: list[dspy.Example]
    test: list[dspy.Example]

    @property
    def sizes(self) -> dict[str, int]:
        return {"train": len(self.train), "dev": len(self.dev), "test": len(self.test)}


def _count(value: int | float, total: int, name: str) -> int:
    # A float is always a fraction (1.0 = everything); an int is always a count.
    if isinstance(value, float) and 0 <= value <= 1:
        return round(value * total)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ValueError(f"{name}={value!r} must be a count (int >= 0) or a fraction (float in [0, 1])")


def split_frames(
    examples: Sequence[dspy.Example], *, train: int | float, dev: int | float, seed: int = 0
) -> Splits:
    """Seeded train/dev/test split, stratified by the set of reasoning types.

    Each stratum is shuffled with ``random.Random(seed)`` and its members are spread evenly over
    the ordering, so every prefix (train, then dev) holds each stratum in proportion; the rest
    is test. The same seed and input always give the same split.

    Args:
        examples: The full list (not modified).
        train: Number (int) or fraction (float in [0, 1]) of examples for training.
        dev: Number or fraction for development (optimizer validation).
        seed: Seed for the shuffle; record it with the run.
    """
    total = len(examples)
    n_train, n_dev = _count(train, total, "train"), _count(dev, total, "dev")
    if n_train + n_dev > total:
        raise ValueError(f"train ({n_train}) + dev ({n_dev}) exceed the {total} examples available")
    rng = random.Random(seed)
    strata: dict[tuple[str, ...], list[dspy.Example]] = defaultdict(list)
    for ex in sorted(examples, key=lambda e: e.id):
        strata[tuple(sorted(ex.reasoning_types))].append(ex)
    keyed = []
    for key in sorted(strata):
        members = strata[key]
        rng.shuffle(members)
        offset = rng.random()
        keyed.extend(((i + offset) / len(members), ex.id, ex) for i, ex in enumerate(members))
    ordered = [ex for _, _, ex in sorted(keyed, key=lambda t: (t[0], t[1]))]
    return Splits(ordered[:n_train], ordered[n_train : n_train + n_dev], ordered[n_train + n_dev :])


def summarize(examples: Sequence[dspy.Example], store=None) -> dict:
    """Counts that describe a dataset and, given an ArticleStore, its corpus coverage."""
    types = Counter(t for ex in examples for t in ex.reasoning_types)
    per_question = [len(ex.gold_urls) for ex in examples]
    unique_links = sorted({url for ex in examples for url in ex.gold_urls})
    summary: dict = {
        "rows": len(examples),
        "reasoning_types": dict(types.most_common()),
        "articles_per_question": {
            "min": min(per_question),
            "median": statistics.median(per_question),
            "mean": round(statistics.fmean(per_question), 3),
            "max": max(per_question),
            "histogram": dict(sorted(Counter(per_question).items())),
        },
        "unique_links": len(unique_links),
    }
    if store is not None:
        resolved = {url for url in unique_links if store.resolve(url) is not None}
        covered = [ex for ex in examples if all(url in resolved for url in ex.gold_urls)]
        summary["corpus"] = {
            "articles": len(store),
            "links_resolved": len(resolved),
            "link_coverage": round(len(resolved) / len(unique_links), 4),
            "questions_fully_covered": len(covered),
            "questions_not_fully_covered": sorted(
                ex.id for ex in examples if any(url not in resolved for url in ex.gold_urls)
            ),
        }
    return summary
