"""Loading FRAMES files, bad inputs, seeded splits and the summary CLI."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import dspy
import pytest

from frames_dspy.base.paths import data_file
from frames_dspy.commands.data import main
from frames_dspy.data.links import normalize_link
from frames_dspy.data.questions import (
    REASONING_TYPES,
    DatasetError,
    dataset_fingerprint,
    load_frames,
    split_frames,
)

TINY = Path(__file__).parents[1] / "fixtures" / "tiny"
TINY_TSV = TINY / "frames.tsv"  # hub layout: the first (index) column has no name
TINY_CSV = TINY / "frames.csv"  # the shared-data layout: the index column is called `id`
TINY_PAGES = TINY / "pages.jsonl"

HEADER = "id,Prompt,Answer,wikipedia_link_1,reasoning_types\n"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- load_frames on the fixtures ----------------------------------------------------------------


@pytest.mark.parametrize("path", [TINY_TSV, TINY_CSV], ids=["tsv", "csv"])
def test_load_frames_reads_both_layouts(path):
    examples = load_frames(path)
    assert [ex.id for ex in examples] == [90, 226, 564, 764, 823]
    assert all(isinstance(ex.id, int) for ex in examples)


def test_tsv_and_csv_give_the_same_examples():
    from_tsv = [ex.toDict() for ex in load_frames(TINY_TSV)]
    from_csv = [ex.toDict() for ex in load_frames(str(TINY_CSV))]
    assert from_tsv == from_csv


def test_example_fields():
    ex = {e.id: e for e in load_frames(TINY_TSV)}[764]
    assert set(ex.inputs().keys()) == {"question"}
    assert ex.question.startswith("Who won the French Open Men’s Singles tournament")
    assert ex.answer == "Novak Djokovic"
    assert ex.gold_urls == [
        "https://en.wikipedia.org/wiki/List_of_MLS_Cup_finals",
        "https://en.wikipedia.org/wiki/2021_French_Open_–_Men's_singles",
    ]
    assert ex.gold_titles == ["List of MLS Cup finals", "2021 French Open – Men's singles"]
    assert ex.reasoning_types == ["Tabular reasoning"]


def test_gold_urls_are_normalised_and_deduplicated_across_columns():
    # Row 90 names each link in a link column and again in wiki_links; the last three come
    # from one joined `wikipedia_link_11+` cell.
    ex = {e.id: e for e in load_frames(TINY_TSV)}[90]
    assert len(ex.gold_urls) == 8
    assert len(set(ex.gold_urls)) == 8
    assert ex.gold_urls[-3:] == [
        "https://en.wikipedia.org/wiki/American_Family_Field",
        "https://en.wikipedia.org/wiki/LoanDepot_Park",
        "https://en.wikipedia.org/wiki/Globe_Life_Field",
    ]
    assert ex.gold_titles[4] == "Minute Maid Park"


def test_fixture_link_quirks_survive_loading():
    by_id = {e.id: e for e in load_frames(TINY_CSV)}
    assert "https://en.wikipedia.org/wiki/Grazia_Deledda" in by_id[226].gold_urls
    assert "I Think I'm Go Go" in by_id[564].gold_titles
    assert by_id[823].gold_urls[0] == "https://simple.wikipedia.org/wiki/Video_assistant_referee"


def test_reasoning_types_are_split_on_the_bar():
    ex = {e.id: e for e in load_frames(TINY_TSV)}[90]
    assert ex.reasoning_types == [
        "Numerical reasoning",
        "Tabular reasoning",
        "Multiple constraints",
    ]
    assert all(t in REASONING_TYPES for e in load_frames(TINY_TSV) for t in e.reasoning_types)


def test_reasoning_types_tolerate_spacing_and_repeats(tmp_path):
    path = _write(
        tmp_path,
        "f.csv",
        HEADER + '0,Q?,A,https://en.wikipedia.org/wiki/A,"Temporal reasoning|  Post processing '
        '| Temporal reasoning"\n',
    )
    assert load_frames(path)[0].reasoning_types == ["Temporal reasoning", "Post processing"]


def test_question_whitespace_is_collapsed_and_answer_stripped(tmp_path):
    path = _write(
        tmp_path,
        "f.csv",
        HEADER
        + '0,"How   many\nmoons? ", 42 ,https://en.wikipedia.org/wiki/Moon,Numerical reasoning\n',
    )
    ex = load_frames(path)[0]
    assert ex.question == "How many moons?"
    assert ex.answer == "42"


def test_rows_without_an_id_column_are_numbered_by_position(tmp_path):
    text = "Prompt,Answer,wiki_links,reasoning_types\n" + "".join(
        f"Q{i}?,A{i},\"['https://en.wikipedia.org/wiki/T{i}']\",Numerical reasoning\n"
        for i in range(3)
    )
    examples = load_frames(_write(tmp_path, "f.csv", text))
    assert [ex.id for ex in examples] == [0, 1, 2]
    assert examples[2].gold_titles == ["T2"]


def test_utf8_bom_is_accepted(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes(
        (
            "\ufeff" + HEADER + "0,Q?,A,https://en.wikipedia.org/wiki/A,Numerical reasoning\n"
        ).encode()
    )
    assert load_frames(path)[0].id == 0


def test_line_separator_inside_an_unquoted_cell_does_not_split_the_row(tmp_path):
    # U+2028 is not a CSV line break; splitting on it cuts the row in two.
    path = _write(
        tmp_path,
        "f.tsv",
        "\tPrompt\tAnswer\twikipedia_link_1\treasoning_types\n"
        "0\tFirst part\u2028second part?\t42\t"
        "https://en.wikipedia.org/wiki/A\tNumerical reasoning\n",
    )
    examples = load_frames(path)
    assert len(examples) == 1
    assert examples[0].answer == "42"


# --- bad inputs ---------------------------------------------------------------------------------


def _error(source) -> str:
    with pytest.raises(DatasetError) as info:
        load_frames(source)
    return str(info.value)


@pytest.mark.parametrize(
    ("name", "row", "found"),
    [
        # A hub-style TSV row two tab-separated cells short (pandas would pad it).
        ("short.tsv", "1\tQ?\tA\n", 3),
        ("long.csv", "1,Q?,A,https://en.wikipedia.org/wiki/A,Temporal reasoning,extra\n", 6),
    ],
)
def test_rows_with_the_wrong_number_of_fields_are_rejected(tmp_path, name, row, found):
    sep = "\t" if name.endswith(".tsv") else ","
    header = sep.join(["id", "Prompt", "Answer", "wikipedia_link_1", "reasoning_types"]) + "\n"
    good = sep.join(["0", "Q?", "A", "https://en.wikipedia.org/wiki/A", "Numerical reasoning"])
    path = _write(tmp_path, name, header + good + "\n" + row)
    message = _error(path)
    assert str(path) in message and "line 3" in message
    assert "expected 5 fields" in message and f"found {found}" in message


def test_missing_file(tmp_path):
    path = tmp_path / "nope.tsv"
    message = _error(path)
    assert str(path) in message
    assert "does not exist" in message


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        pytest.param("empty.csv", "", ["empty"], id="empty"),
        pytest.param("header.csv", HEADER, ["no rows"], id="header only"),
        pytest.param(
            "cols.csv",
            "id,Prompt,wikipedia_link_1\n0,Q?,https://en.wikipedia.org/wiki/A\n",
            ["'Answer'", "'reasoning_types'"],
            id="required columns missing",
        ),
        pytest.param(
            "links.csv",
            "id,Prompt,Answer,reasoning_types\n0,Q?,A,Post processing\n",
            ["wikipedia_link_* or wiki_links"],
            id="link columns missing",
        ),
        pytest.param(
            "dups.csv",
            HEADER + 2 * "7,Q?,A,https://en.wikipedia.org/wiki/A,Post processing\n",
            ["id 7 appears twice", "rows 1 and 2"],
            id="duplicate ids",
        ),
        pytest.param(
            "frames.json", TINY_CSV.read_text(encoding="utf-8"), [".tsv or .csv"], id="suffix"
        ),
        pytest.param(
            "ids.csv",
            HEADER + "x7,Q?,A,https://en.wikipedia.org/wiki/A,Post\n",
            ["'x7'"],
            id="non-integer id",
        ),
    ],
)
def test_a_refused_file_is_named_with_what_is_wrong(tmp_path, name, text, says):
    path = _write(tmp_path, name, text)
    message = _error(path)
    assert str(path) in message
    assert [part for part in says if part not in message] == []


def test_whitespace_only_file_counts_as_empty(tmp_path):
    path = _write(tmp_path, "blank.tsv", "\n  \n")
    assert "empty" in _error(path)


def test_non_utf8_bytes(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes(
        (HEADER + "0,Caf\xe9?,A,https://en.wikipedia.org/wiki/A,Post processing\n").encode(
            "latin-1"
        )
    )
    message = _error(path)
    assert str(path) in message
    assert "not UTF-8" in message


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("0,,A,https://en.wikipedia.org/wiki/A,Post processing\n", "Prompt"),
        ("0,Q?,  ,https://en.wikipedia.org/wiki/A,Post processing\n", "Answer"),
    ],
)
def test_empty_prompt_or_answer(tmp_path, row, field):
    message = _error(_write(tmp_path, "f.csv", HEADER + row))
    assert f"empty {field}" in message


def test_dataset_error_is_a_value_error():
    assert issubclass(DatasetError, ValueError)


# --- fingerprint --------------------------------------------------------------------------------


def test_dataset_fingerprint_is_stable_and_sensitive():
    examples = load_frames(TINY_TSV)
    assert dataset_fingerprint(examples) == dataset_fingerprint(load_frames(TINY_CSV))
    changed = [ex.copy() for ex in examples]
    changed[0] = changed[0].copy(answer="332 feet")
    assert dataset_fingerprint(changed) != dataset_fingerprint(examples)


# --- split_frames -------------------------------------------------------------------------------

# Strata of a synthetic set: sizes 90/50/40/20 (200 examples).
_STRATA = {
    ("Multiple constraints",): 90,
    ("Numerical reasoning", "Tabular reasoning"): 50,
    ("Temporal reasoning",): 40,
    ("Post processing", "Multiple constraints"): 20,
}


def _synthetic(n_per_stratum: dict[tuple[str, ...], int] = _STRATA) -> list[dspy.Example]:
    examples, next_id = [], 0
    for types, count in n_per_stratum.items():
        for _ in range(count):
            examples.append(
                dspy.Example(
                    id=next_id,
                    question=f"q{next_id}",
                    answer=f"a{next_id}",
                    gold_urls=[],
                    gold_titles=[],
                    reasoning_types=list(types),
                ).with_inputs("question")
            )
            next_id += 1
    random.Random(1).shuffle(examples)
    return examples


def _ids(split) -> tuple[list[int], list[int], list[int]]:
    return ([e.id for e in split.train], [e.id for e in split.dev], [e.id for e in split.test])


def test_same_seed_gives_the_same_split():
    examples = _synthetic()
    assert _ids(split_frames(examples, train=50, dev=30, seed=3)) == _ids(
        split_frames(examples, train=50, dev=30, seed=3)
    )


def test_split_does_not_depend_on_input_order():
    examples = _synthetic()
    reordered = list(reversed(examples))
    assert _ids(split_frames(examples, train=50, dev=30, seed=3)) == _ids(
        split_frames(reordered, train=50, dev=30, seed=3)
    )


def test_different_seed_gives_a_different_split():
    examples = _synthetic()
    first = _ids(split_frames(examples, train=50, dev=30, seed=0))
    second = _ids(split_frames(examples, train=50, dev=30, seed=1))
    assert set(first[0]) != set(second[0])


def test_splits_are_disjoint_and_cover_everything():
    examples = _synthetic()
    train, dev, test = _ids(split_frames(examples, train=60, dev=40, seed=0))
    assert not set(train) & set(dev)
    assert not set(train) & set(test)
    assert not set(dev) & set(test)
    assert sorted(train + dev + test) == sorted(ex.id for ex in examples)


def test_counts_give_exact_sizes():
    split = split_frames(_synthetic(), train=60, dev=40, seed=0)
    assert split.sizes == {"train": 60, "dev": 40, "test": 100}


def test_fractions_give_rounded_sizes():
    split = split_frames(_synthetic(), train=0.5, dev=0.15, seed=0)
    assert split.sizes == {"train": 100, "dev": 30, "test": 70}


def test_zero_train_and_dev_leaves_everything_in_test():
    split = split_frames(_synthetic(), train=0, dev=0, seed=0)
    assert split.sizes == {"train": 0, "dev": 0, "test": 200}


def test_request_larger_than_the_data_raises():
    with pytest.raises(ValueError, match="exceed the 200 examples"):
        split_frames(_synthetic(), train=150, dev=51, seed=0)


@pytest.mark.parametrize("bad", [-1, -0.5, 2.5, "10"])
def test_bad_sizes_raise(bad):
    with pytest.raises(ValueError, match="train="):
        split_frames(_synthetic(), train=bad, dev=10, seed=0)


def test_input_list_is_not_mutated():
    examples = _synthetic()
    before = [ex.toDict() for ex in examples]
    order = [id(ex) for ex in examples]
    split_frames(examples, train=50, dev=30, seed=5)
    assert [id(ex) for ex in examples] == order
    assert [ex.toDict() for ex in examples] == before


@pytest.mark.parametrize("seed", [0, 1, 2, 7])
def test_strata_are_proportional_in_train_and_dev(seed):
    examples = _synthetic()
    total = len(examples)
    # 75 and 45 of 200 do not divide the strata evenly, so rounding is exercised.
    split = split_frames(examples, train=75, dev=45, seed=seed)
    for part, size in ((split.train, 75), (split.dev, 45)):
        counts = Counter(tuple(sorted(ex.reasoning_types)) for ex in part)
        for types, n in _STRATA.items():
            expected = n * size / total
            assert abs(counts[tuple(sorted(types))] - expected) <= 1.5, (types, counts, expected)


def test_split_of_the_fixture_keeps_the_example_objects():
    examples = load_frames(TINY_TSV)
    split = split_frames(examples, train=2, dev=1, seed=0)
    assert {id(ex) for ex in split.train + split.dev + split.test} == {id(ex) for ex in examples}


# --- the CLI ------------------------------------------------------------------------------------


def test_main_json_summary(capsys):
    assert main(["--dataset", str(TINY_TSV), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == 5
    assert summary["dataset"] == str(TINY_TSV)
    assert summary["reasoning_types"] == {
        "Tabular reasoning": 3,
        "Multiple constraints": 3,
        "Numerical reasoning": 3,
        "Temporal reasoning": 1,
    }
    # Links per question: 8 (row 90), 4 (226), 2 (564), 2 (764), 3 (823).
    assert summary["articles_per_question"]["min"] == 2
    assert summary["articles_per_question"]["max"] == 8
    assert summary["articles_per_question"]["histogram"] == {"2": 2, "3": 1, "4": 1, "8": 1}
    assert summary["unique_links"] == 19
    assert "corpus" not in summary


def test_main_with_a_corpus_reports_coverage(capsys):
    # The alias table beside pages.jsonl maps Minute_Maid_Park to the Daikin Park page.
    assert main(["--dataset", str(TINY_CSV), "--corpus", str(TINY_PAGES), "--json"]) == 0
    corpus = json.loads(capsys.readouterr().out)["corpus"]
    assert corpus["articles"] == 6
    assert corpus["links_resolved"] == 6
    assert corpus["questions_fully_covered"] == 1
    assert corpus["questions_not_fully_covered"] == [90, 226, 564, 823]


def test_main_text_summary(capsys):
    assert main(["--dataset", str(TINY_TSV)]) == 0
    out = capsys.readouterr().out
    assert "rows: 5" in out
    assert "unique normalised links: 19" in out


def test_main_reports_a_bad_dataset_on_stderr(tmp_path, capsys):
    missing = tmp_path / "missing.csv"
    assert main(["--dataset", str(missing), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert str(missing) in captured.err


# --- the real file ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_examples(real_data):
    """The 824 questions: the hub's test.tsv or a local copy of it as CSV, the same rows."""
    return real_data.examples


@pytest.mark.real
def test_real_file_counts(real_examples):
    assert len(real_examples) == 824
    assert [ex.id for ex in real_examples] == list(range(824))
    assert Counter(t for ex in real_examples for t in ex.reasoning_types) == {
        "Multiple constraints": 549,
        "Numerical reasoning": 293,
        "Temporal reasoning": 278,
        "Tabular reasoning": 236,
        "Post processing": 107,
    }
    # One more than the data README's 2,520: the double-encoded French Open link decodes,
    # and index.php?title=Bronco and ID;_Peace_B are read whole.
    assert len({url for ex in real_examples for url in ex.gold_urls}) == 2521
    per_question = [len(ex.gold_urls) for ex in real_examples]
    assert (min(per_question), max(per_question)) == (2, 23)


@pytest.mark.real
@pytest.mark.parametrize(
    ("row", "n_links"),
    # Totals from the data README's list of questions that are not fully covered.
    [(90, 8), (199, 15), (226, 4), (230, 12), (231, 19), (444, 23), (537, 17), (540, 20)]
    + [(615, 13), (644, 3), (764, 2)],
)
def test_real_bad_rows_give_every_link(real_examples, row, n_links):
    ex = real_examples[row]
    assert ex.id == row
    assert len(ex.gold_urls) == n_links
    assert len(set(ex.gold_urls)) == n_links


@pytest.mark.real
def test_real_quirky_rows(real_examples):
    assert "https://en.wikipedia.org/wiki/Bronco" in real_examples[98].gold_urls
    assert "ID; Peace B" in real_examples[596].gold_titles
    assert real_examples[644].gold_titles[-1] == "Pokémon"
    assert real_examples[764].gold_titles[-1] == "2021 French Open – Men's singles"
    assert (
        "https://simple.wikipedia.org/wiki/Video_assistant_referee" in real_examples[823].gold_urls
    )
    # Row 88's Special:Search link is not an article.
    assert real_examples[88].gold_titles == ["Moss", "Cattle", "Fleckvieh"]


@pytest.mark.real
def test_real_split_is_disjoint_and_repeatable(real_examples):
    first = split_frames(real_examples, train=200, dev=300, seed=0)
    assert first.sizes == {"train": 200, "dev": 300, "test": 324}
    assert _ids(first) == _ids(split_frames(real_examples, train=200, dev=300, seed=0))
    train, dev, test = _ids(first)
    assert len(set(train) | set(dev) | set(test)) == 824


@pytest.mark.real
def test_real_corpus_coverage(real_data, capsys):
    # A local copy's corpus is the one `--corpus default` names.
    corpus = "default" if real_data.corpus == data_file("corpus") else str(real_data.corpus)
    assert main(["--dataset", str(real_data.questions), "--corpus", corpus, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == 824
    assert summary["unique_links"] == 2521
    covered = summary["corpus"]
    if real_data.manifest is None:  # the offline copy: its crawl's counts (its data README)
        assert covered["articles"] == 2460
        assert covered["links_resolved"] == 2460
        assert covered["questions_fully_covered"] == 808
        return
    # Fetched from Wikipedia: what the fetch's manifest says it found, and no link more.
    manifest = real_data.manifest
    assert manifest["links"] == 2521
    assert covered["articles"] == manifest["articles"]
    assert covered["links_resolved"] == manifest["links"] - manifest["unresolved_links"]
    unresolved = set(manifest["unresolved"])
    whole = [
        ex
        for ex in real_data.examples
        if not {normalize_link(u) for u in ex.gold_urls} & unresolved
    ]
    assert covered["questions_fully_covered"] == len(whole)
