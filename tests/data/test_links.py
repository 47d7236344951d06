"""Link normalisation against the real quirks of the FRAMES link cells.

Every quoted cell below is copied verbatim from ``frames/frames_test_set.csv`` (row = ``id``).
"""

from __future__ import annotations

import pytest

from frames_dspy.data.links import extract_links, link_title, normalize_link, title_key

# --- cells copied from the real file ------------------------------------------------------------

# Row 90, `wikipedia_link_11+`: three URLs joined by ", " with a trailing ", ".
ROW_90_LINK_11 = (
    "https://en.wikipedia.org/wiki/American_Family_Field, "
    "https://en.wikipedia.org/wiki/LoanDepot_Park, "
    "https://en.wikipedia.org/wiki/Globe_Life_Field, "
)
# Row 90, `wiki_links`: a Python-list string whose last element is the joined cell again.
ROW_90_WIKI_LINKS = (
    "['https://en.wikipedia.org/wiki/List_of_current_Major_League_Baseball_stadiums', "
    "'https://en.wikipedia.org/wiki/Rogers_Centre', "
    "'https://en.wikipedia.org/wiki/Chase_Field', "
    "'https://en.wikipedia.org/wiki/T-Mobile_Park', "
    "'https://en.wikipedia.org/wiki/Minute_Maid_Park', "
    "'https://en.wikipedia.org/wiki/American_Family_Field, "
    "https://en.wikipedia.org/wiki/LoanDepot_Park, "
    "https://en.wikipedia.org/wiki/Globe_Life_Field, ']"
)
# Row 226, `wikipedia_link_2` and `_3`: no scheme.
ROW_226_LINK_2 = "en.wikipedia.org/wiki/Grazia_Deledda"
ROW_226_LINK_3 = "en.wikipedia.org/wiki/List_of_female_Nobel_laureates"
# Row 226, `wikipedia_link_4`: a raw (unencoded) non-ASCII title.
ROW_226_LINK_4 = "https://en.wikipedia.org/wiki/Irène_Joliot-Curie"
# Row 644, `wikipedia_link_3`: a note (and a trailing space) after the URL.
ROW_644_LINK_3 = "https://en.wikipedia.org/wiki/Pok%C3%A9mon (NOT REQUIRED, BUT HELPFUL) "
# Row 764: a fragment, and an apostrophe encoded twice (%27 -> %2527).
ROW_764_LINK_1 = "https://en.wikipedia.org/wiki/List_of_MLS_Cup_finals#Results_by_team"
ROW_764_LINK_2 = "https://en.wikipedia.org/wiki/2021_French_Open_%E2%80%93_Men%2527s_singles"
# Row 823: the only simple.wikipedia.org link, and fragments on the others.
ROW_823_LINK_1 = "https://simple.wikipedia.org/wiki/Video_assistant_referee"
ROW_823_LINK_2 = "https://en.wikipedia.org/wiki/2018_FIFA_World_Cup#Officiating"
ROW_823_LINK_3 = "https://en.wikipedia.org/wiki/Diego_Costa#Spain"
# Row 98, `wikipedia_link_4`: the index.php?title= form.
ROW_98_LINK_4 = "https://en.wikipedia.org/w/index.php?title=Bronco&redirect=no"
# Row 88, `wikipedia_link_2`: a search results page, not an article.
ROW_88_LINK_2 = (
    "https://en.wikipedia.org/w/index.php?search=Polytrichum+piliferum&title=Special:Search"
    "&profile=advanced&fulltext=1&ns0=1"
)
# Row 596, `wikipedia_link_2`: a ';' inside the title.
ROW_596_LINK_2 = "https://en.wikipedia.org/wiki/ID;_Peace_B"
# Row 385, `wikipedia_link_2`: a mobile host plus a single-encoded apostrophe.
ROW_385_LINK_2 = "https://en.m.wikipedia.org/wiki/List_of_Wimbledon_gentlemen%27s_singles_champions"
# Row 564, `wiki_links`: the list uses double quotes for the element holding an apostrophe.
ROW_564_WIKI_LINKS = (
    '["https://en.wikipedia.org/wiki/I_Think_I\'m_Go_Go", '
    "'https://en.wikipedia.org/wiki/E.T._the_Extra-Terrestrial']"
)
# Row 86, `wiki_links`: an apostrophe and an encoded en dash in one element.
ROW_86_WIKI_LINKS = (
    "[\"https://en.wikipedia.org/wiki/Bowling_at_the_2011_Pan_American_Games_%E2%80%93_Women's"
    "_individual\", 'https://en.wikipedia.org/wiki/Bowling_at_the_2017_World_Games']"
)


# --- extract_links ------------------------------------------------------------------------------


def test_joined_urls_in_one_cell_are_split():
    assert extract_links(ROW_90_LINK_11) == [
        "en.wikipedia.org/wiki/American_Family_Field",
        "en.wikipedia.org/wiki/LoanDepot_Park",
        "en.wikipedia.org/wiki/Globe_Life_Field",
    ]


def test_wiki_links_list_with_a_joined_element_gives_every_link_once():
    links = extract_links(ROW_90_WIKI_LINKS)
    assert len(links) == 8
    assert len(set(links)) == 8
    assert links[4] == "en.wikipedia.org/wiki/Minute_Maid_Park"
    assert links[-3:] == extract_links(ROW_90_LINK_11)


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        (ROW_226_LINK_2, "en.wikipedia.org/wiki/Grazia_Deledda"),
        (ROW_226_LINK_3, "en.wikipedia.org/wiki/List_of_female_Nobel_laureates"),
    ],
)
def test_link_without_scheme_is_kept(cell, expected):
    assert extract_links(cell) == [expected]
    assert normalize_link(cell) == expected


def test_unencoded_unicode_title_is_kept_as_is():
    assert extract_links(ROW_226_LINK_4) == ["en.wikipedia.org/wiki/Irène_Joliot-Curie"]


def test_note_after_the_url_is_dropped():
    assert extract_links(ROW_644_LINK_3) == ["en.wikipedia.org/wiki/Pokémon"]


def test_double_percent_encoding_is_decoded_fully():
    assert extract_links(ROW_764_LINK_2) == [
        "en.wikipedia.org/wiki/2021_French_Open_–_Men's_singles"
    ]
    assert link_title(ROW_764_LINK_2) == "2021 French Open – Men's singles"


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        (ROW_764_LINK_1, "en.wikipedia.org/wiki/List_of_MLS_Cup_finals"),
        (ROW_823_LINK_2, "en.wikipedia.org/wiki/2018_FIFA_World_Cup"),
        (ROW_823_LINK_3, "en.wikipedia.org/wiki/Diego_Costa"),
    ],
)
def test_fragment_is_dropped(cell, expected):
    assert extract_links(cell) == [expected]


def test_encoded_fragment_is_dropped_after_decoding():
    # Row 232: the fragment itself is percent-encoded.
    cell = (
        "https://en.wikipedia.org/wiki/London_Broncos#1994%E2%80%932005:_Broncos_and_Super_League"
    )
    assert extract_links(cell) == ["en.wikipedia.org/wiki/London_Broncos"]


def test_simple_wikipedia_host_is_kept_distinct():
    assert extract_links(ROW_823_LINK_1) == ["simple.wikipedia.org/wiki/Video_assistant_referee"]
    assert normalize_link(ROW_823_LINK_1) != normalize_link(
        "https://en.wikipedia.org/wiki/Video_assistant_referee"
    )


def test_index_php_title_form_becomes_a_wiki_link():
    assert extract_links(ROW_98_LINK_4) == ["en.wikipedia.org/wiki/Bronco"]
    assert link_title(ROW_98_LINK_4) == "Bronco"


def test_special_search_link_is_dropped():
    assert extract_links(ROW_88_LINK_2) == []
    assert normalize_link(ROW_88_LINK_2) is None
    assert normalize_link("https://en.wikipedia.org/wiki/Special:Search?search=moss") is None


def test_semicolon_inside_a_title_is_kept():
    assert extract_links(ROW_596_LINK_2) == ["en.wikipedia.org/wiki/ID;_Peace_B"]
    assert link_title(ROW_596_LINK_2) == "ID; Peace B"


def test_real_mobile_host_maps_to_the_desktop_host():
    assert extract_links(ROW_385_LINK_2) == [
        "en.wikipedia.org/wiki/List_of_Wimbledon_gentlemen's_singles_champions"
    ]


def test_synthetic_mobile_host_matches_the_desktop_link():
    mobile = "https://en.m.wikipedia.org/wiki/Daikin_Park"
    assert normalize_link(mobile) == normalize_link("https://en.wikipedia.org/wiki/Daikin_Park")
    assert normalize_link(mobile) == "en.wikipedia.org/wiki/Daikin_Park"


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        (
            ROW_564_WIKI_LINKS,
            [
                "en.wikipedia.org/wiki/I_Think_I'm_Go_Go",
                "en.wikipedia.org/wiki/E.T._the_Extra-Terrestrial",
            ],
        ),
        (
            ROW_86_WIKI_LINKS,
            [
                "en.wikipedia.org/wiki/Bowling_at_the_2011_Pan_American_Games_–_Women's_individual",
                "en.wikipedia.org/wiki/Bowling_at_the_2017_World_Games",
            ],
        ),
    ],
)
def test_apostrophe_inside_a_wiki_links_list(cell, expected):
    assert extract_links(cell) == expected


def test_broken_list_literal_still_yields_its_links():
    # Not valid Python: the parser falls back to scanning the raw text.
    cell = (
        "['https://en.wikipedia.org/wiki/Rogers_Centre', 'https://en.wikipedia.org/wiki/Chase_Field"
    )
    assert extract_links(cell) == [
        "en.wikipedia.org/wiki/Rogers_Centre",
        "en.wikipedia.org/wiki/Chase_Field",
    ]


@pytest.mark.parametrize("cell", [None, "", "   ", "no link here", "https://example.org/wiki/Foo"])
def test_cells_without_wikipedia_links_give_nothing(cell):
    assert extract_links(cell) == []


def test_duplicates_collapse_across_spellings():
    cell = (
        "https://en.wikipedia.org/wiki/Rogers_Centre, en.m.wikipedia.org/wiki/rogers_Centre#Roof, "
        "http://en.wikipedia.org/wiki/Rogers%20Centre/"
    )
    assert extract_links(cell) == ["en.wikipedia.org/wiki/Rogers_Centre"]


# --- normalize_link -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/wiki/Foo",
        "https://en.wikipedia.org/",
        "https://en.wikipedia.org/wiki/",
        "https://en.wikipedia.org/wiki/#History",
        "https://en.wikipedia.org/w/index.php?search=foo",
        "   ",
    ],
)
def test_non_article_urls_normalise_to_none(url):
    assert normalize_link(url) is None


def test_first_letter_is_upper_cased_and_the_rest_kept():
    assert normalize_link("https://en.wikipedia.org/wiki/loanDepot_park") == (
        "en.wikipedia.org/wiki/LoanDepot_park"
    )


def test_other_namespaces_are_kept():
    # Category: and Module: pages are named by real FRAMES rows (650, 179).
    assert normalize_link("https://en.wikipedia.org/wiki/Category:Summer_Olympics_in_London") == (
        "en.wikipedia.org/wiki/Category:Summer_Olympics_in_London"
    )


@pytest.mark.parametrize("title", ["Special", "Search", "Special_Olympics"])
def test_article_titles_that_look_like_namespaces_are_kept(title):
    # Only a "Special:" prefix marks a non-article; a plain title must survive.
    assert normalize_link(f"https://en.wikipedia.org/wiki/{title}") == (
        f"en.wikipedia.org/wiki/{title}"
    )


def test_normalize_is_idempotent_on_its_output():
    for cell in (ROW_764_LINK_2, ROW_644_LINK_3, ROW_823_LINK_1, ROW_98_LINK_4, ROW_596_LINK_2):
        link = extract_links(cell)[0]
        assert normalize_link(link) == link


# --- link_title and title_key -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("link", "title"),
    [
        ("https://en.wikipedia.org/wiki/Minute_Maid_Park", "Minute Maid Park"),
        ("en.wikipedia.org/wiki/Pokémon", "Pokémon"),
        ("https://en.wikipedia.org/wiki/Pok%C3%A9mon", "Pokémon"),
        ("https://en.wikipedia.org/wiki/loanDepot_park", "LoanDepot park"),
        (ROW_823_LINK_1, "Video assistant referee"),
        ("https://en.wikipedia.org/wiki/1989_(album)", "1989 (album)"),
    ],
)
def test_link_title_spells_titles_like_wikipedia(link, title):
    assert link_title(link) == title


def test_link_title_of_a_bare_title_decodes_and_uses_spaces():
    assert link_title("Men%2527s_singles") == "Men's singles"


def test_title_key_ignores_case_underscores_spacing_and_unicode_form():
    key = title_key("Daikin Park")
    assert title_key("daikin_park") == key
    assert title_key("  DAIKIN   Park ") == key
    composed, decomposed = "Pok\u00e9mon", "Poke\u0301mon"
    assert title_key(composed) == title_key(decomposed)
    assert title_key("Pok%C3%A9mon") == title_key(composed)
