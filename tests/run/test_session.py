"""frames_dspy.run.session: settings in; the articles, the LMs, the judge and the run's
resolved settings out (the caller's, frozen, left as they were).

LMs are injected DummyLMs, or come from a recording stand-in for ``make_lm``: no real model
is loaded. The data is ``tests/fixtures/eval_frames.csv`` and ``eval_corpus.jsonl`` (9
articles), copied to a temporary folder so no alias table sits beside the corpus.
"""

from __future__ import annotations

import dataclasses
import gzip
import shutil
from dataclasses import dataclass
from pathlib import Path

import dspy
import pytest
from dspy.utils.dummies import DummyLM

import frames_dspy.run.session
from frames_dspy.data.questions import dataset_fingerprint, load_frames
from frames_dspy.judge.autorater import AUTORATER
from frames_dspy.lm import parse_spec
from frames_dspy.run.session import (
    article_source,
    load_store,
    make_judge,
    open_articles,
    open_session,
)
from frames_dspy.run.settings import JUDGE_MAX_TOKENS, SESSION_KEYS, ModelDataSettings

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture
def frames_data_dir(tmp_path, monkeypatch) -> Path:
    """A FRAMES_DATA_DIR laid out like shared/data/raw, built from the tiny fixtures."""
    root = tmp_path / "frames-data"
    (root / "frames_wiki").mkdir(parents=True)
    (root / "distractor_wiki_summaries").mkdir()
    tiny = FIXTURES / "tiny"
    with gzip.open(root / "frames_wiki" / "pages.jsonl.gz", "wt", encoding="utf-8") as handle:
        handle.write((tiny / "pages.jsonl").read_text(encoding="utf-8"))
    shutil.copy(tiny / "frames_link_to_page.tsv", root / "frames_wiki")
    shutil.copy(tiny / "distractors.json", root / "distractor_wiki_summaries/summaries_en-us.json")
    monkeypatch.setenv("FRAMES_DATA_DIR", str(root))
    return root


def lm_for_tests() -> DummyLM:
    """Answers any question "Novak Djokovic" and judges any answer FALSE."""
    return DummyLM(
        {
            "`[[ ## decision ## ]]`": {"explanation": "they differ", "decision": "FALSE"},
            "`[[ ## answer ## ]]`": {"answer": "Novak Djokovic"},
        }
    )


def settings_for(data, **overrides) -> ModelDataSettings:
    values = {
        "dataset": str(data["dataset"]),
        "corpus": str(data["corpus"]),
        "distractors": "none",
    }
    values.update(overrides)
    return ModelDataSettings(**values)


def session_for(
    settings: ModelDataSettings,
    *,
    store_needed: bool = False,
    retriever_needed: bool = False,
    needed_for: str = "the retrieval and oracle conditions",
    **parts,
):
    """The two steps a run takes: its articles, then its session over them."""
    articles = open_articles(settings, needed=store_needed, needed_for=needed_for)
    return open_session(settings, articles=articles, retriever_needed=retriever_needed, **parts)


@pytest.fixture
def made(monkeypatch) -> list[tuple[str, dict]]:
    """Stand in for make_lm: records each (spec, options) and hands out a DummyLM."""
    calls = []

    def fake_make_lm(spec, **kwargs):
        calls.append((spec, kwargs))
        return lm_for_tests()

    monkeypatch.setattr(frames_dspy.run.session, "make_lm", fake_make_lm)
    return calls


# --- open_session -----------------------------------------------------------------------------


def test_the_callers_settings_are_left_alone_and_the_sessions_are_resolved(data):
    aliases = data["corpus"].with_name("frames_link_to_page.tsv")
    shutil.copy(FIXTURES / "tiny" / "frames_link_to_page.tsv", aliases)
    settings = settings_for(data, distractors=None)
    before = dataclasses.asdict(settings)
    session = session_for(settings, store_needed=True, retriever_needed=False, lm=lm_for_tests())

    assert dataclasses.asdict(settings) == before
    filled = session.settings
    assert filled is not settings
    assert filled.corpus == str(data["corpus"])
    assert filled.aliases == str(aliases)  # the alias table beside the corpus is used
    assert filled.distractors is None  # a user's corpus gets no default distractors
    assert filled.context_tokens == 2000  # embedded 'local' default
    assert filled.threads == 1  # an embedded model serialises its calls
    assert filled.autorater == AUTORATER  # recorded, so another autorater's run is not resumed
    assert session.model == parse_spec("local")
    assert len(session.store) == 9
    assert session.retriever is None


def test_the_budget_comes_from_the_model_spec_and_its_window(data):
    api = {"model": "openai/gpt-4o-mini"}
    session = session_for(
        settings_for(data, **api), store_needed=False, retriever_needed=False, lm=lm_for_tests()
    )
    assert session.settings.context_tokens == 30_000  # an API model whose window is unknown
    assert session.settings.threads == 8  # API models and servers run questions at once
    lm = lm_for_tests()
    lm.declared_context_window = 16_000
    session = session_for(
        settings_for(data, **api), store_needed=False, retriever_needed=False, lm=lm
    )
    assert session.settings.context_tokens == 12_000  # the window less the prompt and answer


def test_an_explicit_budget_is_kept(data):
    settings = settings_for(data, context_tokens=777, threads=3)
    session = session_for(settings, store_needed=False, retriever_needed=False, lm=lm_for_tests())
    assert (session.settings.context_tokens, session.settings.threads) == (777, 3)


def test_settings_are_frozen_so_no_step_patches_them(data):
    settings = settings_for(data)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.threads = 4
    session = session_for(settings, lm=lm_for_tests())
    with pytest.raises(dataclasses.FrozenInstanceError):
        session.settings.context_tokens = 10


def test_mlflow_traces_alone_resolve_to_the_default_store():
    resolved = ModelDataSettings(mlflow_traces=True).resolved(
        model=parse_spec("local"), window=None
    )
    assert (
        resolved.mlflow == "mlruns"
        and ModelDataSettings().resolved(model=parse_spec("local"), window=None).mlflow is None
    )


def test_without_a_judge_model_the_judge_is_a_greedy_copy_of_the_program_lm(data):
    lm = lm_for_tests()
    lm.kwargs["temperature"] = 0.7
    session = session_for(settings_for(data), store_needed=False, retriever_needed=False, lm=lm)
    judge = session.judge_lm
    assert judge is not lm and isinstance(judge, DummyLM)
    assert judge.kwargs["max_tokens"] == JUDGE_MAX_TOKENS == 256
    assert judge.kwargs["temperature"] == 0.0
    assert (lm.kwargs["temperature"], lm.kwargs["max_tokens"]) == (0.7, 1000)
    assert session.autorater.judge_lm is judge
    assert session.self_judging
    # The judge's calls are told apart from the program's.
    # An alias the rules leave to the judge (the fake judge says FALSE to anything).
    verdict = session.autorater.judge("Which country?", "United States", "USA")
    assert (verdict.correct, verdict.method) == (False, "judge")
    # Two judge calls (the default protocol's extraction, then the verdict), none by the program.
    assert len(judge.history) == 2 and lm.history == []


def test_the_program_lm_passed_as_judge_is_copied_too(data):
    lm = lm_for_tests()
    session = session_for(
        settings_for(data), store_needed=False, retriever_needed=False, lm=lm, judge_lm=lm
    )
    assert session.lm is lm
    assert session.judge_lm is not lm and session.judge_lm.kwargs["max_tokens"] == 256


def test_an_injected_judge_is_used_as_it_is(data):
    lm, judge = lm_for_tests(), lm_for_tests()
    settings = settings_for(data, judge_model="openai/gpt-4o")
    session = session_for(
        settings, store_needed=False, retriever_needed=False, lm=lm, judge_lm=judge
    )
    assert session.judge_lm is judge and session.autorater.judge_lm is judge
    assert not session.self_judging


@pytest.mark.parametrize(
    "overrides, self_judging",
    [
        ({}, True),
        ({"judge_model": "local"}, True),
        ({"judge_model": "local-1.5b"}, False),
        ({"model": "openai/m", "api_base": "http://a", "judge_model": "openai/m"}, False),
        (
            {
                "model": "openai/m",
                "api_base": "http://a",
                "judge_model": "openai/m",
                "judge_api_base": "http://a",
            },
            True,
        ),
        (
            {
                "model": "openai/m",
                "api_base": "http://a",
                "judge_model": "openai/m",
                "judge_api_base": "http://b",
            },
            False,
        ),
    ],
)
def test_self_judging_means_the_same_model_on_the_same_server(data, made, overrides, self_judging):
    settings = settings_for(data, **overrides)
    assert settings.judge_is_program_model() is self_judging
    session = session_for(settings, store_needed=False, retriever_needed=False, lm=lm_for_tests())
    assert session.self_judging is self_judging
    # Only a judge that is another model (or server) is built; the program LM was given.
    assert len(made) == (0 if self_judging else 1)


def test_without_an_lm_the_program_lm_is_built_from_the_settings(data, made):
    settings = settings_for(
        data,
        model="openai/gpt-4o-mini",
        api_base="http://lm:8000",
        temperature=0.3,
        max_tokens=128,
    )
    session = session_for(settings, store_needed=False, retriever_needed=False)
    assert made == [
        (
            "openai/gpt-4o-mini",
            {"temperature": 0.3, "max_tokens": 128, "api_base": "http://lm:8000", "timeout": None},
        )
    ]
    assert session.judge_lm is not session.lm  # the judge is a copy, not a second model


def test_the_retriever_is_built_over_the_sessions_store(data):
    session = session_for(
        settings_for(data), store_needed=False, retriever_needed=True, lm=lm_for_tests()
    )
    assert session.retriever is not None and session.retriever.store is session.store
    [hit] = session.retriever.search("Which novel did Bram Stoker publish in 1897?", 1)
    assert session.store[hit.article_id].title == "Dracula"


def test_a_store_is_needed_and_there_is_no_corpus(data, monkeypatch):
    monkeypatch.delenv("FRAMES_DATA_DIR", raising=False)
    settings = settings_for(data, corpus=None)
    with pytest.raises(ValueError, match="the oracle condition need a corpus") as info:
        session_for(
            settings,
            store_needed=True,
            retriever_needed=True,
            needed_for="the oracle condition",
            lm=lm_for_tests(),
        )
    assert "--corpus PATH" in str(info.value) and "FRAMES_DATA_DIR" in str(info.value)
    # Not needed: no store, and so no retriever either.
    session = session_for(settings, store_needed=False, retriever_needed=True, lm=lm_for_tests())
    assert session.store is None and session.retriever is None


def test_provenance_names_the_data_the_models_and_the_environment(data):
    examples = load_frames(data["dataset"])
    session = session_for(
        settings_for(data), store_needed=True, retriever_needed=False, lm=lm_for_tests()
    )
    record = session.provenance(examples)
    assert record["dataset_sha256"] == dataset_fingerprint(examples)
    assert record["corpus_sha256"] == session.store.fingerprint
    assert record["corpus_articles"] == 9
    assert record["lm_model"] == record["judge_model"] == "dummy"
    assert record["packages"]["dspy"] == dspy.__version__
    assert {"python", "started"} <= set(record)

    without = session_for(
        settings_for(data, corpus=None),
        store_needed=False,
        retriever_needed=False,
        lm=lm_for_tests(),
    )
    record = without.provenance(examples)
    assert (record["corpus_sha256"], record["corpus_articles"]) == (None, 0)


# --- article_source, load_store ---------------------------------------------------------------


def test_the_default_corpus_comes_with_its_aliases_and_distractors(frames_data_dir):
    source = article_source(ModelDataSettings())
    store = load_store(source)
    wiki = frames_data_dir / "frames_wiki"
    assert source.corpus == str(wiki / "pages.jsonl.gz")
    assert source.aliases == str(wiki / "frames_link_to_page.tsv")
    assert source.distractors == str(
        frames_data_dir / "distractor_wiki_summaries" / "summaries_en-us.json"
    )
    assert source.retriever == "bm25s" and source.snapshot is None
    titles = {article.title for article in store}
    assert "Moon" in titles  # a distractor summary
    assert store.resolve("https://en.wikipedia.org/wiki/Minute_Maid_Park").title == "Daikin Park"


def test_a_users_corpus_gets_no_default_distractors(frames_data_dir, data):
    source = article_source(settings_for(data, distractors=None))
    store = load_store(source)
    assert source.corpus == str(data["corpus"]) and source.distractors is None
    assert len(store) == 9
    # "none" switches the default distractors off for the default corpus too.
    source = article_source(ModelDataSettings(distractors="none"))
    store = load_store(source)
    assert source.distractors == "none"
    assert "Moon" not in {article.title for article in store}


def test_a_store_handed_in_keeps_the_data_settings_as_given(data):
    settings = settings_for(data, corpus=None, distractors=None)
    store = load_store(article_source(settings_for(data)))
    articles = open_articles(settings, needed=True, store=store)
    assert articles.store is store and articles.source is None
    session = open_session(settings, articles=articles, retriever_needed=False, lm=lm_for_tests())
    assert (session.settings.corpus, session.settings.aliases) == (None, None)


# --- make_judge -------------------------------------------------------------------------------


def test_a_judge_model_is_built_as_a_second_greedy_lm(data, made):
    settings = settings_for(data, judge_model="openai/gpt-4o", judge_api_base="http://judge:8000")
    program = lm_for_tests()
    judge_lm, autorater = make_judge(settings, lm=program)
    assert made == [
        (
            "openai/gpt-4o",
            {
                "temperature": 0.0,
                "max_tokens": 256,
                "api_base": "http://judge:8000",
                "timeout": None,
            },
        )
    ]
    assert judge_lm is not program and autorater.judge_lm is judge_lm


def test_an_embedded_judge_model_is_built_from_its_spec(data, made):
    settings = settings_for(data, model="openai/gpt-4o-mini", judge_model="local-1.5b")
    judge_lm, autorater = make_judge(settings, lm=lm_for_tests())
    assert [spec for spec, _ in made] == ["local-1.5b"]
    assert autorater.judge_lm is judge_lm


def test_session_keys_are_settings_and_the_shared_settings_copy_over():
    names = {f.name for f in dataclasses.fields(ModelDataSettings)}
    assert set(SESSION_KEYS) <= names  # a typo would make resume checks compare None to None

    @dataclass(frozen=True)
    class Extended(ModelDataSettings):
        rounds: int = 3

    extended = Extended(model="openai/m", corpus="c.jsonl", rounds=5)
    shared = extended.model_data_settings()
    assert set(shared) == names  # only the shared settings, ready for another config
    assert ModelDataSettings(**shared) == ModelDataSettings(model="openai/m", corpus="c.jsonl")


@pytest.mark.parametrize("protocol", ["rules+extract", "rules+lm", "lm"])
def test_the_settings_judge_protocol_is_the_autoraters_and_validate_can_override_it(data, protocol):
    settings = settings_for(data, judge_protocol=protocol)
    session = session_for(settings, store_needed=False, retriever_needed=False, lm=lm_for_tests())
    assert session.autorater.protocol == protocol
    assert dataclasses.asdict(session.settings)["judge_protocol"] == protocol  # recorded
    _, other = make_judge(settings, lm=lm_for_tests(), protocol="rules+lm")
    assert other.protocol == "rules+lm"
