"""Tests for frames_dspy.programs: the six setups with DummyLM, context packing, save/load.

Programs run against a scripted retriever (queries map to ranked article ids) so that round,
query and de-duplication behaviour can be checked exactly; one test uses real bm25s.

A note on DummyLM: when a reply cannot be parsed, DSPy's ChatAdapter retries once through the
JSONAdapter, so a scripted bad reply is listed twice.
"""

from __future__ import annotations

import json

import dspy
import pytest
from dspy.utils.dummies import DummyLM

from frames_dspy.data.corpus import Article, ArticleStore
from frames_dspy.programs import (
    CHARS_PER_TOKEN,
    CONDITIONS,
    MultiHop,
    Naive,
    Oracle,
    ProgramSpec,
    QueryStats,
    RetrieveThenAnswer,
    build_program,
    clean_queries,
    load_program,
    pack_articles,
    save_program,
)
from frames_dspy.retrieval.bm25 import Hit, build_retriever

QUESTION = "Which river flows through the capital of the country where Bell was born?"

TEXTS = {
    "bell": ("Alexander Graham Bell", "Bell was born in Edinburgh, Scotland, in 1847."),
    "edinburgh": ("Edinburgh", "Edinburgh is the capital of Scotland on the Firth of Forth."),
    "leith": ("Water of Leith", "The Water of Leith flows through central Edinburgh."),
    "scotland": ("Scotland", "Scotland is a country that is part of the United Kingdom."),
    "phone": ("Telephone", "The telephone converts sound into electrical signals."),
    "forth": ("Firth of Forth", "The Firth of Forth is the estuary of the River Forth."),
    "moon": ("Moon", "The Moon is the only natural satellite of Earth."),
    "etna": ("Mount Etna", "Etna is an active volcano on the east coast of Sicily."),
}


def make_store() -> ArticleStore:
    return ArticleStore(Article(key, title, text) for key, (title, text) in TEXTS.items())


class ScriptedRetriever:
    """Each query returns a fixed ranking; records every call.

    Args:
        table: query -> ranked article ids (unknown queries return nothing).
        honour_exclude: Skip excluded ids as the real retrievers do; False returns them
            anyway, to check that the program de-duplicates by itself.
    """

    def __init__(self, store, table, *, honour_exclude=True):
        self.store = store
        self.table = table
        self.honour_exclude = honour_exclude
        self.calls: list[tuple[list[str], int, set[str]]] = []

    def search(self, query, k, *, exclude=()):
        return self.search_many([query], k, exclude=exclude)[0]

    def search_many(self, queries, k, *, exclude=()):
        excluded = set(exclude)
        self.calls.append((list(queries), k, excluded))
        results = []
        for query in queries:
            ranked = self.table.get(query, [])
            if self.honour_exclude:
                ranked = [i for i in ranked if i not in excluded]
            results.append(
                [Hit(i, self.store[i].title, float(10 - n)) for n, i in enumerate(ranked[:k])]
            )
        return results


@pytest.fixture
def store() -> ArticleStore:
    return make_store()


def plan(*queries: str) -> dict:
    return {"plan": "find the missing facts", "queries": list(queries)}


def run(program, lm, **inputs):
    with dspy.context(lm=lm):
        return program(**inputs)


def user_message(lm: DummyLM, call: int) -> str:
    return lm.history[call]["messages"][-1]["content"]


# --- pack_articles ----------------------------------------------------------------------------


def long_text(words: int, seed: str = "word") -> str:
    return " ".join(f"{seed}{i}" for i in range(words))


def test_pack_keeps_order_and_every_article():
    articles = [Article(f"a{i}", f"Title {i}", long_text(300, f"t{i}x")) for i in range(8)]
    packed = pack_articles(articles, 300)
    assert packed.article_ids == [a.id for a in articles]
    positions = [packed.text.index(f"[{i + 1}] Title {i}\n") for i in range(8)]
    assert positions == sorted(positions)
    assert set(packed.kept_fraction) == {a.id for a in articles}
    assert all(0 < f < 1 for f in packed.kept_fraction.values())
    assert packed.n_truncated == 8


def test_pack_fair_share_keeps_short_articles_whole():
    short = Article("short", "Short", "A short article that fits easily.")
    long_a = Article("long_a", "Long A", long_text(1000, "alpha"))
    long_b = Article("long_b", "Long B", long_text(1000, "gamma"))
    packed = pack_articles([long_a, short, long_b], 400)
    assert packed.kept_fraction["short"] == 1.0
    assert short.text in packed.text
    assert 0 < packed.kept_fraction["long_a"] < 1
    # The two long articles are the same length, so they get the same share.
    assert packed.kept_fraction["long_a"] == pytest.approx(packed.kept_fraction["long_b"])
    assert "…" in packed.text
    summary = packed.summary()
    assert summary["articles"] == 3
    assert summary["truncated"] == 2
    assert summary["budget_tokens"] == 400
    assert summary["kept_fraction"]["short"] == 1.0


def test_pack_short_articles_are_not_cut():
    articles = [Article(f"a{i}", f"T{i}", f"text {i}") for i in range(3)]
    packed = pack_articles(articles, 1000)
    assert packed.kept_fraction == {"a0": 1.0, "a1": 1.0, "a2": 1.0}
    assert packed.n_truncated == 0
    assert "…" not in packed.text
    assert packed.used_tokens == round(len(packed.text) / CHARS_PER_TOKEN)


@pytest.mark.parametrize("n_articles", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("budget", [50, 120, 400, 1000])
def test_pack_stays_near_the_budget(n_articles, budget):
    articles = [
        Article(f"a{i}", f"Article {i}", long_text(150 + 100 * i, f"w{i}"))
        for i in range(n_articles)
    ]
    packed = pack_articles(articles, budget)
    # The code reserves each header plus 2 characters; the "\n\n" separators and the " …"
    # marks can take up to 2 more characters per article (see the strict test below).
    slack = 2 * n_articles
    assert len(packed.text) <= budget * CHARS_PER_TOKEN + slack
    assert packed.used_tokens <= budget + slack / CHARS_PER_TOKEN
    assert all(f"[{i + 1}] Article {i}" in packed.text for i in range(n_articles))


def test_pack_budget_is_a_hard_limit():
    # BUG (programs.pack_articles): the separators and the " …" marks are not fully reserved,
    # so several truncated articles overshoot the budget by a few characters.
    over = []
    for n_articles in (2, 4, 8):
        for text in ("x" * 5000, long_text(1000)):
            articles = [Article(f"a{i}", f"Table {i}", text) for i in range(n_articles)]
            for budget in (50, 100, 1000):
                packed = pack_articles(articles, budget)
                if len(packed.text) > budget * CHARS_PER_TOKEN or packed.used_tokens > budget:
                    over.append((n_articles, budget, len(packed.text), packed.used_tokens))
    assert over == []


def test_pack_rejects_a_non_positive_budget():
    with pytest.raises(ValueError, match="budget_tokens=0"):
        pack_articles([Article("a", "A", "text")], 0)


# --- clean_queries ----------------------------------------------------------------------------


def test_clean_queries_strips_markers_and_drops_duplicates():
    kept, stats = clean_queries(
        ['1. "Bell birthplace"', "- bell  BIRTHPLACE", "", "  ", "Query 2: Edinburgh river", "*"],
        limit=5,
        drop_repeats=True,
    )
    assert kept == ["Bell birthplace", "Edinburgh river"]
    assert stats == QueryStats(generated=6, dropped_duplicates=4)


def test_clean_queries_accepts_a_string_or_none_and_respects_limit_and_taken():
    kept, stats = clean_queries("a\nb\nc\nd", limit=2, taken=["A"], drop_repeats=False)
    assert kept == ["b", "c"]
    assert stats.generated == 4
    assert stats.dropped_duplicates == 1
    assert clean_queries(None, limit=3, drop_repeats=True) == ([], QueryStats())


@pytest.mark.parametrize("drop", [True, False])
def test_clean_queries_repeats_of_earlier_rounds(drop):
    kept, stats = clean_queries(
        ["Edinburgh", "water of leith"], limit=3, past=["edinburgh"], drop_repeats=drop
    )
    assert stats.repeated == 1
    assert stats.dropped_repeats == (1 if drop else 0)
    assert kept == (["water of leith"] if drop else ["Edinburgh", "water of leith"])


# --- single-shot programs ---------------------------------------------------------------------


def test_naive_answers_from_the_question_alone():
    lm = DummyLM([{"answer": "  Water of Leith "}])
    pred = run(Naive(), lm, question=QUESTION)
    assert pred.answer == "Water of Leith"
    assert pred.context_ids == []
    assert pred.queries == []
    assert len(lm.history) == 1
    assert pred.packing is None
    # Calls and tokens are the runner's to count, once (frames_dspy.run.runner), not the program's.
    assert not {"lm_calls", "prompt_tokens", "completion_tokens"} & set(pred.keys())
    assert QUESTION in user_message(lm, 0)


def test_retrieve_then_answer_uses_top_n_docs_in_retrieval_order(store):
    retriever = ScriptedRetriever(store, {QUESTION: ["leith", "bell", "moon", "etna"]})
    program = RetrieveThenAnswer(retriever, n_docs=2, context_tokens=500)
    lm = DummyLM([{"answer": "Water of Leith"}])
    pred = run(program, lm, question=QUESTION)
    assert pred.answer == "Water of Leith"
    assert pred.context_ids == [["leith", "bell"]]
    assert pred.queries == [[QUESTION]]
    assert len(lm.history) == 1
    assert retriever.calls == [([QUESTION], 2, set())]
    prompt = user_message(lm, 0)
    assert prompt.index("[1] Water of Leith") < prompt.index("[2] Alexander Graham Bell")
    assert "Moon" not in prompt
    assert pred.packing["articles"] == 2
    assert pred.packing["budget_tokens"] == 500


def test_retrieve_then_answer_with_real_bm25(store, tmp_path):
    retriever = build_retriever(store, backend="bm25s", index_dir=tmp_path)
    program = RetrieveThenAnswer(retriever, n_docs=1, context_tokens=500)
    lm = DummyLM([{"answer": "Sicily"}])
    pred = run(program, lm, question="Where is the volcano Etna?")
    assert pred.context_ids == [["etna"]]
    assert "[1] Mount Etna" in user_message(lm, 0)


def test_retrieve_then_answer_without_hits_still_answers(store):
    program = RetrieveThenAnswer(ScriptedRetriever(store, {}), n_docs=4, context_tokens=500)
    lm = DummyLM([{"answer": "unknown"}])
    pred = run(program, lm, question=QUESTION)
    assert pred.context_ids == [[]]
    assert pred.packing is None
    assert "(no articles were found)" in user_message(lm, 0)


def test_oracle_resolves_gold_urls(store):
    program = Oracle(store, context_tokens=500)
    lm = DummyLM([{"answer": "Water of Leith"}])
    gold = [
        "https://en.wikipedia.org/wiki/Edinburgh",
        "https://en.wikipedia.org/wiki/Water_of_Leith",
        "https://en.wikipedia.org/wiki/Edinburgh#History",
        "https://en.wikipedia.org/wiki/Not_In_The_Corpus",
    ]
    pred = run(program, lm, question=QUESTION, gold_urls=gold)
    assert pred.context_ids == [["edinburgh", "leith"]]
    assert pred.queries == []
    assert len(lm.history) == 1
    prompt = user_message(lm, 0)
    assert prompt.index("[1] Edinburgh") < prompt.index("[2] Water of Leith")
    assert TEXTS["leith"][1] in prompt


def test_oracle_needs_gold_urls(store):
    with pytest.raises(ValueError, match="gold_urls"):
        Oracle(store, context_tokens=500)(question=QUESTION)


def test_answer_prompt_respects_the_context_budget(store):
    big = ArticleStore(Article(f"big{i}", f"Big {i}", long_text(2000, f"b{i}x")) for i in range(4))
    program = Oracle(big, context_tokens=300)
    lm = DummyLM([{"answer": "x"}])
    pred = run(program, lm, question="q", gold_urls=[f"Big {i}" for i in range(4)])
    assert pred.context_ids == [["big0", "big1", "big2", "big3"]]
    assert pred.packing["used_tokens"] <= 300
    assert pred.packing["truncated"] == 4
    context = user_message(lm, 0).split("[[ ## context ## ]]\n", 1)[1]
    context = context.split("\n\n[[ ## question ## ]]", 1)[0]
    assert len(context) <= 300 * CHARS_PER_TOKEN


# --- MultiHop ---------------------------------------------------------------------------------


ROUND_TABLE = {
    QUESTION: ["bell", "phone", "moon"],
    "Bell birthplace": ["bell", "edinburgh", "scotland"],
    "capital of Scotland": ["edinburgh", "scotland", "forth"],
    "Edinburgh river": ["leith", "forth", "edinburgh"],
    "Water of Leith": ["leith", "etna"],
}


def scripted(store, **settings) -> MultiHop:
    """A MultiHop over the scripted retriever (:data:`ROUND_TABLE`) with a 500-token budget."""
    return MultiHop(ScriptedRetriever(store, ROUND_TABLE), context_tokens=500, **settings)


@pytest.mark.parametrize("rounds", [1, 2, 3])
@pytest.mark.parametrize("planning", [True, False])
def test_multihop_runs_the_requested_rounds(store, rounds, planning):
    written = [["Bell birthplace"], ["capital of Scotland"], ["Edinburgh river"]]
    step = plan if planning else (lambda *q: {"queries": list(q)})
    lm = DummyLM([step(*written[r]) for r in range(rounds)] + [{"answer": "Water of Leith"}])
    program = scripted(store, rounds=rounds, k=2, n_docs=2, planning=planning)
    pred = run(program, lm, question=QUESTION)
    assert pred.answer == "Water of Leith"
    assert len(pred.context_ids) == rounds
    assert len(pred.queries) == rounds
    assert pred.queries == [[QUESTION, *written[r]] for r in range(rounds)]
    assert len(lm.history) == rounds + 1
    assert pred.query_stats["generated"] == rounds
    assert pred.query_stats["errors"] == 0


def test_multihop_k_and_include_question(store):
    many = plan("Bell birthplace", "capital of Scotland", "Edinburgh river", "Water of Leith")
    lm = DummyLM([many, {"answer": "x"}])
    program = scripted(store, rounds=1, k=3, n_docs=1)
    pred = run(program, lm, question=QUESTION)
    assert pred.queries == [[QUESTION, "Bell birthplace", "capital of Scotland"]]
    assert "[[ ## n_queries ## ]]\n2" in user_message(lm, 0)

    lm = DummyLM([many, {"answer": "x"}])
    program = scripted(store, rounds=1, k=3, n_docs=1, include_question=False)
    pred = run(program, lm, question=QUESTION)
    assert pred.queries == [["Bell birthplace", "capital of Scotland", "Edinburgh river"]]
    assert QUESTION not in pred.queries[0]
    assert "[[ ## n_queries ## ]]\n3" in user_message(lm, 0)


def test_multihop_trace_keeps_only_the_queries_sent(store):
    # Bootstrapped demos come from the trace; a runaway list of repeated queries from a small
    # model must not become a demo many times longer than what the program sent.
    runaway = plan("Bell birthplace", *["Edinburgh river", "July"] * 30)
    lm = DummyLM([runaway, {"answer": "x"}])
    program = scripted(store, rounds=1, k=2, n_docs=1, include_question=False)
    with dspy.context(lm=lm, trace=[]):
        pred = program(question=QUESTION)
        trace = list(dspy.settings.trace)
    assert pred.queries == [["Bell birthplace", "Edinburgh river"]]
    written = [out.queries for predictor, _, out in trace if predictor is program.generate]
    assert written == [["Bell birthplace", "Edinburgh river"]]


def test_multihop_with_k1_and_the_question_writes_no_queries(store):
    lm = DummyLM([{"answer": "x"}])
    program = scripted(store, rounds=3, k=1, n_docs=1)
    pred = run(program, lm, question=QUESTION)
    assert pred.queries == [[QUESTION]] * 3
    assert len(lm.history) == 1
    # The question's next-best article is added each round, since earlier ones are excluded.
    assert pred.context_ids == [["bell"], ["bell", "phone"], ["bell", "phone", "moon"]]


@pytest.mark.parametrize("honour_exclude", [True, False])
def test_multihop_n_docs_and_no_article_twice(store, honour_exclude):
    retriever = ScriptedRetriever(store, ROUND_TABLE, honour_exclude=honour_exclude)
    lm = DummyLM([plan("Bell birthplace"), plan("Edinburgh river"), {"answer": "x"}])
    program = MultiHop(retriever, rounds=2, k=2, n_docs=2, context_tokens=500)
    pred = run(program, lm, question=QUESTION)
    first, second = pred.context_ids
    assert len(first) == len(set(first))
    assert len(second) == len(set(second))
    assert len(first) <= 2 * len(pred.queries[0])
    assert second[: len(first)] == first
    assert not set(second[len(first) :]) & set(first)
    assert len(second) - len(first) <= 2 * len(pred.queries[1])
    assert all(k == 2 for _, k, _ in retriever.calls)
    # Each round excludes what is already in context.
    assert retriever.calls[0][2] == set()
    assert retriever.calls[1][2] == set(first)
    if honour_exclude:
        # "Bell birthplace" also ranks bell first: it costs that query a slot, not a duplicate.
        assert first == ["bell", "phone", "edinburgh"]
        assert second == [*first, "moon", "leith", "forth"]


def test_multihop_later_rounds_see_found_articles_and_past_queries(store):
    lm = DummyLM([plan("Bell birthplace"), plan("Edinburgh river"), {"answer": "x"}])
    program = scripted(store, rounds=2, k=2, n_docs=1)
    run(program, lm, question=QUESTION)
    first, second = user_message(lm, 0), user_message(lm, 1)
    assert "(nothing yet)" in first
    assert "Alexander Graham Bell" in second
    assert "Bell birthplace" in second.split("[[ ## past_queries ## ]]", 1)[1]


def test_a_traced_round_keeps_the_past_queries_it_was_shown(store):
    # Bootstrapped demos are made from the trace: a round's entry must hold the past queries
    # that round was shown, not the list as later rounds extended it.
    lm = DummyLM([plan("Bell birthplace"), plan("Edinburgh river"), {"answer": "x"}])
    program = scripted(store, rounds=2, k=2, n_docs=1)
    with dspy.context(lm=lm, trace=[]):
        program(question=QUESTION)
        trace = list(dspy.settings.trace)
    shown = [
        inputs["past_queries"] for predictor, inputs, _ in trace if predictor is program.generate
    ]
    assert shown == [[], ["Bell birthplace"]]


@pytest.mark.parametrize("planning", [True, False])
def test_multihop_drops_empty_duplicate_and_repeated_queries(store, planning):
    def step(*queries):
        return plan(*queries) if planning else {"queries": list(queries)}

    lm = DummyLM(
        [
            step("Bell birthplace", " bell   BIRTHPLACE ", "", QUESTION.lower()),
            step("- Bell birthplace", "Edinburgh river"),
            {"answer": "x"},
        ]
    )
    program = scripted(store, rounds=2, k=4, n_docs=1, planning=planning)
    pred = run(program, lm, question=QUESTION)
    assert pred.queries[0] == [QUESTION, "Bell birthplace"]
    stats = pred.query_stats
    assert stats["generated"] == 6
    assert stats["dropped_duplicates"] == 3
    assert stats["repeated"] == 1
    if planning:
        assert pred.queries[1] == [QUESTION, "Edinburgh river"]
        assert stats["dropped_repeats"] == 1
    else:
        assert pred.queries[1] == [QUESTION, "Bell birthplace", "Edinburgh river"]
        assert stats["dropped_repeats"] == 0


@pytest.mark.parametrize("include_question", [True, False])
def test_multihop_query_parse_error_is_counted_and_the_round_runs(store, include_question):
    bad = {"nonsense": "no queries here"}
    lm = DummyLM([bad, bad, plan("Edinburgh river"), {"answer": "Water of Leith"}])
    retriever = ScriptedRetriever(store, ROUND_TABLE)
    program = MultiHop(
        retriever,
        rounds=2,
        k=2,
        n_docs=1,
        include_question=include_question,
        context_tokens=500,
    )
    pred = run(program, lm, question=QUESTION)
    assert pred.answer == "Water of Leith"
    assert pred.query_stats["errors"] == 1
    assert pred.queries[0] == [QUESTION]
    assert pred.context_ids[0] == ["bell"]
    assert "Edinburgh river" in pred.queries[1]
    assert len(pred.context_ids) == 2
    # Round 1's query step was tried twice (DSPy's JSON fallback), then round 2's and the answer.
    assert len(lm.history) == 4


def test_query_stats_add_up_and_read_as_the_records_dict():
    total = QueryStats(generated=3, repeated=1) + QueryStats(generated=2, errors=1)
    assert total == QueryStats(generated=5, repeated=1, errors=1)
    # A record's query_stats keeps this key order (records written before stay comparable).
    assert list(total.as_dict().items()) == [
        ("generated", 5),
        ("repeated", 1),
        ("dropped_repeats", 0),
        ("dropped_duplicates", 0),
        ("errors", 1),
    ]


def test_multihop_prediction_carries_the_counts_as_a_dict(store):
    lm = DummyLM([plan("Bell birthplace", "bell birthplace"), {"answer": "x"}])
    program = scripted(store, rounds=1, k=3, n_docs=1)
    pred = run(program, lm, question=QUESTION)
    assert pred.query_stats == QueryStats(generated=2, dropped_duplicates=1).as_dict()


def test_a_multihop_that_fails_half_way_has_noted_its_finished_rounds(store):
    # The runner credits what a failed program found (frames_dspy.run.runner): each round is
    # noted as it ends, before the next one can fail.
    from frames_dspy.programs.modules import recording_rounds

    class FailingRetriever(ScriptedRetriever):
        def search_many(self, queries, k, *, exclude=()):
            if len(self.calls) == 1:
                raise RuntimeError("index went away")
            return super().search_many(queries, k, exclude=exclude)

    retriever = FailingRetriever(store, ROUND_TABLE)
    lm = DummyLM([plan("capital of Scotland"), plan("Edinburgh river"), {"answer": "x"}])
    program = MultiHop(retriever, rounds=2, k=2, n_docs=1, context_tokens=500)
    with recording_rounds() as trace, pytest.raises(RuntimeError, match="index went away"):
        run(program, lm, question=QUESTION)
    assert trace["context_ids"] == [["bell", "edinburgh"]]
    assert trace["queries"] == [[QUESTION, "capital of Scotland"]]
    assert trace["answer_context"] is None

    # A run that finishes notes what its prediction holds, and the text the answer step saw.
    program.retriever = ScriptedRetriever(store, ROUND_TABLE)
    lm = DummyLM([plan("Bell birthplace"), plan("Edinburgh river"), {"answer": "x"}])
    with recording_rounds() as trace:
        pred = run(program, lm, question=QUESTION)
    assert trace["context_ids"] == pred.context_ids
    assert trace["queries"] == pred.queries
    assert "[1] Alexander Graham Bell" in trace["answer_context"]


def test_multihop_rejects_bad_settings(store):
    retriever = ScriptedRetriever(store, {})
    for name in ("rounds", "k", "n_docs"):
        with pytest.raises(ValueError, match=f"{name}=0"):
            MultiHop(retriever, context_tokens=500, **{name: 0})
    with pytest.raises(ValueError, match="context_tokens"):
        MultiHop(retriever, context_tokens=0)


def test_multihop_question_docs_fills_what_the_written_queries_leave(store):
    # With question_docs the question brings its own budget and takes the slots the written
    # queries leave: a dropped repeat costs no article, each round adds exactly 2 + 1 x 1.
    table = {**ROUND_TABLE, QUESTION: ["bell", "phone", "moon", "scotland", "etna", "forth"]}
    retriever = ScriptedRetriever(store, table)
    lm = DummyLM(
        [{"queries": ["Bell birthplace"]}, {"queries": ["Bell birthplace"]}, {"answer": "x"}]
    )
    program = MultiHop(
        retriever,
        rounds=2,
        k=2,
        n_docs=1,
        planning=False,
        titles=True,
        question_docs=2,
        context_tokens=500,
    )
    pred = run(program, lm, question=QUESTION)
    assert pred.context_ids == [
        ["phone", "moon", "bell"],
        ["phone", "moon", "bell", "scotland", "etna", "forth"],
    ]
    assert pred.queries == [[QUESTION, "Bell birthplace"], [QUESTION]]
    assert pred.query_stats["dropped_repeats"] == 1
    assert "Name the Wikipedia articles" in lm.history[0]["messages"][0]["content"]
    assert program.spec.describe() == "multihop titles r2 k2 n1 q2"


def test_multihop_rejects_titles_with_planning_and_question_docs_without_the_question(store):
    retriever = ScriptedRetriever(store, {})
    with pytest.raises(ValueError, match="titles and planning"):
        MultiHop(retriever, titles=True, planning=True, context_tokens=500)
    with pytest.raises(ValueError, match="question_docs=3 needs the question"):
        MultiHop(retriever, question_docs=3, include_question=False, context_tokens=500)


# --- building, saving, loading ----------------------------------------------------------------


def test_build_program_for_every_condition(store):
    retriever = ScriptedRetriever(store, {})
    kinds = {
        "naive": Naive,
        "bm25": RetrieveThenAnswer,
        "oracle": Oracle,
        "multihop": MultiHop,
    }
    for name, condition in CONDITIONS.items():
        spec = condition.spec
        program = build_program(spec, retriever=retriever, store=store, context_tokens=700)
        assert isinstance(program, kinds[spec.kind]), name
        assert program.spec.kind == spec.kind
    assert build_program(CONDITIONS["bm25-2"].spec, retriever=retriever).n_docs == 2
    planning = build_program(CONDITIONS["multistep-planning"].spec, retriever=retriever)
    assert planning.planning is True
    assert planning.spec.describe() == "multihop planning r5 k5 n10"


def test_build_program_errors_name_the_problem(store):
    with pytest.raises(ValueError, match="unknown program kind 'bm26'"):
        build_program({"kind": "bm26"})
    with pytest.raises(ValueError, match="needs a retriever"):
        build_program({"kind": "multihop"}, store=store)
    with pytest.raises(ValueError, match="needs an article store"):
        build_program({"kind": "oracle"})
    with pytest.raises(ValueError, match=r"unknown multihop setting\(s\) \['depth'\]"):
        build_program({"kind": "multihop", "depth": 3}, retriever=ScriptedRetriever(store, {}))


def customise(program: dspy.Module) -> None:
    """Give every predictor a demo and new instructions, as an optimizer would."""
    for name, predictor in program.named_predictors():
        predictor.signature = predictor.signature.with_instructions(f"Tuned {name}.")
        fields = list(predictor.signature.fields)
        predictor.demos = [dspy.Example(**{f: f"demo {f}" for f in fields})]


@pytest.mark.parametrize("condition", list(CONDITIONS))
def test_save_load_round_trip_gives_the_same_predictions(store, tmp_path, condition):
    spec = CONDITIONS[condition].spec
    if spec.kind == "multihop":
        spec = spec.replace(rounds=2, k=2, n_docs=1)
    retriever = ScriptedRetriever(store, ROUND_TABLE)
    program = build_program(spec, retriever=retriever, store=store, context_tokens=600)
    customise(program)
    path = tmp_path / "program.json"
    save_program(program, str(path), extra={"note": "test"})

    loaded, saved_spec, info = load_program(
        str(path), retriever=retriever, store=store, context_tokens=600
    )
    assert type(loaded) is type(program)
    assert info["note"] == "test"
    assert loaded.spec == program.spec == saved_spec
    assert loaded.dump_state() == program.dump_state()

    script = [plan("Bell birthplace"), plan("Edinburgh river"), {"answer": "Water of Leith"}]
    if spec.kind == "multihop" and not spec.planning:
        script = [{"queries": ["Bell birthplace"]}, {"queries": ["Edinburgh river"]}]
        script.append({"answer": "Water of Leith"})
    elif spec.kind != "multihop":
        script = [{"answer": "Water of Leith"}]
    inputs = {"question": QUESTION, "gold_urls": ["Edinburgh", "Water of Leith"]}
    results = []
    for prog in (program, loaded):
        lm = DummyLM(list(script))
        pred = run(prog, lm, **{k: inputs[k] for k in prog.input_fields})
        results.append((pred.toDict(), [h["messages"] for h in lm.history]))
    assert results[0] == results[1]
    # The prompt carries the loaded instructions and demos.
    assert "Tuned" in results[1][1][0][0]["content"]


def test_load_program_from_another_shape_raises(store, tmp_path):
    path = tmp_path / "naive.json"
    save_program(Naive(), str(path))
    state = json.loads(path.read_text())
    state["frames_dspy_spec"] = {"kind": "multihop", "rounds": 2, "k": 2, "n_docs": 1}
    path.write_text(json.dumps(state))
    with pytest.raises(ValueError, match="different program shape") as info:
        load_program(str(path), retriever=ScriptedRetriever(store, {}), store=store)
    assert "generate" in str(info.value)


def test_load_program_with_cot_mismatch_raises(tmp_path):
    path = tmp_path / "cot.json"
    save_program(Naive(cot=True), str(path))
    state = json.loads(path.read_text())
    state["frames_dspy_spec"]["cot"] = False
    path.write_text(json.dumps(state))
    with pytest.raises(ValueError, match="different program shape"):
        load_program(str(path))


def test_load_program_rejects_files_not_written_by_frames_dspy(tmp_path):
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"answer": {"demos": [], "signature": {}}}))
    with pytest.raises(ValueError, match="not written by frames_dspy"):
        load_program(str(plain))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="cannot read program file"):
        load_program(str(broken))
    with pytest.raises(ValueError, match="cannot read program file"):
        load_program(str(tmp_path / "missing.json"))


def test_capitalised_phrases_are_the_named_things_in_a_question():
    from frames_dspy.programs import capitalised_phrases

    question = (
        "Which President of the United States was born in the year Mount Rushmore's "
        "sculptor visited France's capital, and Which president?"
    )
    assert capitalised_phrases(question) == [
        "President of the United States",
        "Mount Rushmore",
        "France",
    ]
    assert capitalised_phrases("how many? none here.") == []


def test_phrase_queries_fill_to_n_articles_without_an_lm():
    from frames_dspy.programs import PhraseQueries
    from frames_dspy.programs.conditions import condition

    class Hit:
        def __init__(self, article_id):
            self.article_id = article_id

    class Retriever:
        store = {f"{q}{i}": f"article {q}{i}" for q in "qpr" for i in range(20)}

        def __init__(self):
            self.asked = []

        def search_many(self, queries, k, exclude=()):
            [query] = queries
            self.asked.append((query, k))
            prefix = "p" if query == "Mount Rushmore" else "r" if query == "Ohio" else "q"
            ids = [f"{prefix}{i}" for i in range(20) if f"{prefix}{i}" not in exclude]
            return [[Hit(i) for i in ids[:k]]]

    retriever = Retriever()
    spec = condition("phrases-8").spec
    assert (spec.kind, spec.n_docs, spec.k) == ("phrases", 8, 2)
    program = PhraseQueries(retriever, n_docs=8, k=2, context_tokens=100)
    program.answer_step = False
    question = "How far is Mount Rushmore from Ohio?"
    pred = program(question=question)
    assert pred.context_ids == [["q0", "q1", "q2", "q3", "p0", "p1", "r0", "r1"]]
    assert pred.queries == [[question, "Mount Rushmore", "Ohio"]]
    assert pred.answer == ""  # and no LM is configured: it made no call
    short = PhraseQueries(Retriever(), n_docs=6, k=2, context_tokens=100)
    short.answer_step = False
    # No phrase: the question's own results fill all six.
    assert short(question="how far is it?").context_ids == [[f"q{i}" for i in range(6)]]


class _PrefixRetriever:
    """Each query has its own ranked ids (``Mount Rushmore`` -> p0.., ``Ohio`` -> r0..,
    anything else -> its first letter + 0..); excluded ids are skipped."""

    def __init__(self):
        self.store = {
            f"{q}{i}": Article(f"{q}{i}", f"T {q}{i}", "text") for q in "pqrw" for i in range(30)
        }

    def search(self, query, k, *, exclude=()):
        return self.search_many([query], k, exclude=exclude)[0]

    def search_many(self, queries, k, exclude=()):
        out = []
        for query in queries:
            prefix = {"Mount Rushmore": "p", "Ohio": "r"}.get(query)
            prefix = prefix or ("q" if query.startswith("How") else "w")
            ids = [f"{prefix}{i}" for i in range(30) if f"{prefix}{i}" not in exclude]
            out.append([Hit(i, i, 1.0) for i in ids[:k]])
        return out


def test_multihop_phrase_source_without_lm_is_phrases_n():
    from frames_dspy.programs import PhraseQueries

    question = "How far is Mount Rushmore from Ohio?"
    reference = PhraseQueries(_PrefixRetriever(), n_docs=8, k=2, context_tokens=100)
    reference.answer_step = False
    spec = ProgramSpec("multihop", rounds=1, k=1, n_docs=2, question_docs=4, phrase_docs=4)
    assert spec.describe() == "multihop planning r1 k1 n2 q4 p4"
    program = build_program(spec, retriever=_PrefixRetriever())
    program.answer_step = False
    pred = program(question=question)  # no LM configured: it makes no call
    assert pred.context_ids == reference(question=question).context_ids
    assert pred.queries == [[question, "Mount Rushmore", "Ohio"]]
    assert ProgramSpec.from_dict(spec.to_dict()) == spec


def test_multihop_phrase_source_with_written_queries_keeps_the_round_size():
    question = "How far is Mount Rushmore from Ohio?"
    spec = ProgramSpec(
        "multihop", rounds=2, k=2, n_docs=2, question_docs=2, phrase_docs=2, planning=False
    )
    program = build_program(spec, retriever=_PrefixRetriever())
    program.answer_step = False
    lm = DummyLM([{"queries": ["w query"]}, {"queries": ["w query 2"]}])
    pred = run(program, lm, question=question)
    assert pred.context_ids[0] == ["q0", "q1", "p0", "p1", "w0", "w1"]
    assert pred.context_ids[1][6:] == ["q2", "q3", "p2", "p3", "w2", "w3"]
    assert program.round_size == 6
    # The no-LM parts alone at the same budget: the question fills the written slots.
    program.lm_queries = False
    alone = program(question=question)
    assert alone.context_ids[0] == ["q0", "q1", "p0", "p1", "q2", "q3"]
    assert len(alone.context_ids[1]) == 12


def test_phrase_docs_needs_the_question_budget():
    with pytest.raises(ValueError, match="needs question_docs"):
        build_program(
            ProgramSpec("multihop", rounds=1, k=2, n_docs=2, phrase_docs=4),
            retriever=_PrefixRetriever(),
        )
    # A program.json written before the phrase source existed loads unchanged.
    old = {"kind": "multihop", "rounds": 2, "k": 4, "n_docs": 2, "question_docs": 6}
    assert ProgramSpec.from_dict(old).phrase_docs is None


def test_no_lm_references_at_each_questions_own_article_count():
    from frames_dspy.programs import NoLMReferences, lm_queries_per_round, without_lm
    from frames_dspy.results.records import QuestionRecord

    question = "How far is Mount Rushmore from Ohio?"
    refs = NoLMReferences(_PrefixRetriever())
    assert refs.found("bm25", question, 3) == {"q0", "q1", "q2"}
    assert refs.found("phrases", question, 4) == {"q0", "q1", "p0", "p1"}

    def record(gold, ids):
        return QuestionRecord(
            "x", len(gold), question=question, gold_ids=gold, context_ids=[ids], recall=[0.0]
        )

    records = [
        record(["p0", "q5"], ["a", "b", "c", "d"]),  # N=4: bm25 finds 0 of 2, phrases 1 of 2
        record(["q1"], ["a", "b"]),  # N=2: bm25 finds it, phrases (q0, p0) does not
        QuestionRecord("x", 9, question=question),  # no gold article: left out
    ]
    best = refs.strongest(records)
    assert best == {"bm25": 0.5, "phrases": 0.25, "best": "bm25", "value": 0.5}
    with pytest.raises(ValueError, match="unknown reference"):
        refs.found("oracle", question, 2)

    spec = ProgramSpec("multihop", rounds=1, k=3, n_docs=2, question_docs=2, phrase_docs=2)
    assert lm_queries_per_round(spec) == 2
    assert lm_queries_per_round(spec.replace(k=1)) == 0
    program = build_program(spec, retriever=_PrefixRetriever())
    alone = without_lm(program)
    assert (alone.lm_queries, program.lm_queries) == (False, True)


def test_the_lm_can_start_writing_in_a_later_round():
    from frames_dspy.programs import lm_queries_per_round

    question = "How far is Mount Rushmore from Ohio?"
    spec = ProgramSpec(
        "multihop",
        rounds=2,
        k=2,
        n_docs=2,
        question_docs=2,
        phrase_docs=2,
        planning=False,
        lm_from_round=2,
    )
    assert spec.describe().endswith("q2 p2 lm2")
    program = build_program(spec, retriever=_PrefixRetriever())
    program.answer_step = False
    lm = DummyLM([{"queries": ["w query"]}])
    pred = run(program, lm, question=question)
    assert len(lm.history) == 1  # round 2 only
    # Round 1: the question fills the LM's slots; round 2 the written query brings its 2.
    assert pred.context_ids[0] == ["q0", "q1", "p0", "p1", "q2", "q3"]
    assert pred.context_ids[1][6:] == ["q4", "q5", "p2", "p3", "w0", "w1"]
    assert lm_queries_per_round(spec) == 1
    assert lm_queries_per_round(spec.replace(lm_from_round=3)) == 0
