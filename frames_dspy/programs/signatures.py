"""DSPy signatures: answering, the query-writing prompts, and the autorater.

The FRAMES paper describes its prompts but does not print them. Everything below is our own
reconstruction from that description: the vanilla prompt just asks for search queries; the
search-planning prompt adds worked examples of useful query sequences (written here, not taken
from FRAMES questions), forbids repeating an earlier query and asks the model to plan step by
step before it writes the queries. ``NameArticles`` is ours, not the paper's: it asks for the
titles of the Wikipedia articles still missing, since a title is what BM25 finds an article by
and a small model copies names better than it composes keyword queries. ``ChooseAction`` is
ours too: the agent condition's one step (search, read or finish), not a setup of the paper's;
its answer is the ``AnswerWithContext`` step every condition shares. The autorater follows
the paper's description of its judge: decide whether the response carries the meaning and
vital facts of the gold answer.
"""

from __future__ import annotations

from typing import Literal

import dspy

__all__ = [
    "AnswerFromKnowledge",
    "AnswerWithContext",
    "GenerateQueries",
    "PlanQueries",
    "NameArticles",
    "ChooseAction",
    "JudgeAnswer",
]


class AnswerFromKnowledge(dspy.Signature):
    """Answer the question from what you know. Questions may need several facts combined,
    arithmetic, dates or comparisons; work them out, then give one short, final answer (a
    name, number, date or short phrase), not a refusal."""

    question: str = dspy.InputField(desc="a question that may need several facts combined")
    answer: str = dspy.OutputField(desc="the short final answer")


class AnswerWithContext(dspy.Signature):
    """Answer the question using the Wikipedia articles given as context, combining facts from
    several articles where needed (arithmetic, dates, comparisons, counting). If the articles
    do not settle it, give your best answer from what you know. Reply with one short, final
    answer (a name, number, date or short phrase), not a refusal."""

    context: str = dspy.InputField(desc="Wikipedia articles, each headed by its title")
    question: str = dspy.InputField(desc="a question that may need several facts combined")
    answer: str = dspy.OutputField(desc="the short final answer")


class GenerateQueries(dspy.Signature):
    """Write search queries for a keyword (BM25) search engine over Wikipedia articles. The
    queries should find the articles that are still missing for answering the question: name
    the people, places, works, events or lists the question depends on. Each query is a few
    keywords, not a sentence and not an answer."""

    question: str = dspy.InputField(desc="the question to be answered")
    found: str = dspy.InputField(desc="articles already retrieved: titles and opening lines")
    past_queries: list[str] = dspy.InputField(desc="queries already sent in earlier rounds")
    n_queries: int = dspy.InputField(desc="how many queries to write")
    queries: list[str] = dspy.OutputField(desc="the new search queries, keywords only")


class PlanQueries(dspy.Signature):
    """Plan a search over Wikipedia for a question that needs facts from several articles,
    then write search queries for a keyword (BM25) search engine.

    Think step by step: break the question into the facts it needs, note which of them the
    articles already found provide, and aim the queries at the facts still missing. Each step
    usually names an entity that the previous step revealed. Never repeat an earlier query:
    a repeated query returns nothing new. Each query is a few keywords, not a sentence.

    Examples of useful query sequences:
    - "Which river flows through the capital of the country where the inventor of the
      telephone was born?" -> round 1: "Alexander Graham Bell birthplace"; round 2:
      "capital of Scotland Edinburgh"; round 3: "Water of Leith river Edinburgh".
    - "How many years passed between the founding of the university attended by the author
      of Dracula and the novel's publication?" -> round 1: "Bram Stoker education
      university"; round 2: "Trinity College Dublin founded"; round 3: "Dracula novel 1897
      publication".
    - "Which team won the league in the year the tallest building in Chicago was completed?"
      -> round 1: "tallest building in Chicago"; round 2: "Willis Tower completion 1973";
      round 3: "1973 season champions league".
    """

    question: str = dspy.InputField(desc="the question to be answered")
    found: str = dspy.InputField(desc="articles already retrieved: titles and opening lines")
    past_queries: list[str] = dspy.InputField(desc="queries already sent; never repeat one")
    n_queries: int = dspy.InputField(desc="how many queries to write")
    plan: str = dspy.OutputField(desc="the facts still missing and how to reach them, briefly")
    queries: list[str] = dspy.OutputField(desc="the new search queries, keywords only")


class NameArticles(dspy.Signature):
    """Name the Wikipedia articles that are still missing for answering the question.

    Each answer needs facts from several articles: the people, places, works, events,
    organisations or lists the question mentions, and the ones it only describes (the
    author of a book, the capital of a country, the winner of a prize). Read the question
    and the articles already found, then write the exact titles of the missing articles: a
    person's full name, a place's name, a work's or an event's title. Prefer a name the found
    articles reveal over a guess; do not repeat a title already found or already asked for."""

    question: str = dspy.InputField(desc="the question to be answered")
    found: str = dspy.InputField(desc="articles already retrieved: titles and opening lines")
    past_queries: list[str] = dspy.InputField(desc="titles already asked for; never repeat one")
    n_queries: int = dspy.InputField(desc="how many titles to write")
    queries: list[str] = dspy.OutputField(desc="Wikipedia article titles, one per item")


class ChooseAction(dspy.Signature):
    """You are gathering Wikipedia articles so that a question can be answered from them. One
    tool per turn:

    - search: keywords for a keyword (BM25) search engine over Wikipedia; it lists the
      matching articles' titles with their opening words. Name the person, place, work or
      event you are after, in a few keywords.
    - read: the exact title of an article (or its number in the latest results); the
      article is kept for the answer and you see its opening.
    - finish: stop when the articles you have read hold the facts the question needs (the
      answer is then written from them), or when searching more will not help.

    Questions usually need several articles, one leading to the next: read what names the
    next entity, then search for it. A search you already made returns the same articles, so
    change the keywords instead of repeating them."""

    question: str = dspy.InputField(desc="the question the articles must answer")
    steps: str = dspy.InputField(desc="your earlier turns and what each returned")
    limits: str = dspy.InputField(desc="turns, articles and tokens you have left")
    thought: str = dspy.OutputField(desc="what is known, what is missing, briefly")
    tool: str = dspy.OutputField(desc="search, read or finish")
    argument: str = dspy.OutputField(
        desc="search: the keywords; read: the article's title; finish: leave empty"
    )


class JudgeAnswer(dspy.Signature):
    """Decide whether the ground-truth answer is present in a response to a question.

    Judge substance, not wording. The response is correct when the meaning and the vital
    facts of the ground truth are in it, however it is phrased: another form of the same name
    or place, the same number or date written differently, or extra detail that does not
    contradict it. It is incorrect when it gives a different answer, leaves out a vital part
    of the ground truth, wavers between several answers, or mentions the ground truth only to
    set it aside. Explain briefly first, then decide."""

    question: str = dspy.InputField()
    gold_answer: str = dspy.InputField(desc="the ground-truth answer")
    response: str = dspy.InputField(desc="the response being judged")
    explanation: str = dspy.OutputField(desc="one or two sentences comparing the two")
    decision: Literal["TRUE", "FALSE"] = dspy.OutputField(
        desc="TRUE if the ground truth's meaning and vital facts are in the response, else FALSE"
    )
