"""Wikipedia link normalisation that survives the quirks of the real FRAMES file.

The FRAMES link cells are hand-written and messy: several URLs joined by ``", "`` in one
cell, links without a scheme, notes appended after a URL, double percent-encoding,
``#fragments``, mobile hosts, ``index.php?title=`` forms and one ``simple.wikipedia.org``
link. Everything here is pure string work so that both the dataset loader and the article
store agree on one canonical form.
"""

from __future__ import annotations

import ast
import re
import unicodedata
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["extract_links", "normalize_link", "link_title", "title_key"]

# A Wikipedia URL inside free text: optional scheme, any language/mobile host, then either
# /wiki/<title> or /w/index.php?...; stops at whitespace, quotes and list punctuation.
_LINK_RE = re.compile(
    r"(?:https?://)?(?:[A-Za-z0-9-]+\.)*wikipedia\.org/(?:wiki/|w/index\.php\?)[^\s\"\]\[<>]+"
)
# Search pages and the like are not articles; Category:/Module: links are kept (they name pages).
_NON_ARTICLE_NAMESPACES = frozenset({"Special", "Search"})
_PERCENT_RE = re.compile(r"%[0-9A-Fa-f]{2}")


def extract_links(cell: str | None) -> list[str]:
    """Every normalised Wikipedia link found in one cell, in order, without duplicates.

    Args:
        cell: Raw cell text; may hold several URLs, notes, or a Python-list string.

    Returns:
        Canonical links as returned by :func:`normalize_link`.
    """
    if not cell:
        return []
    pieces = [cell]
    if cell.lstrip().startswith("["):
        # The wiki_links column is a Python list literal; titles may contain quotes.
        try:
            pieces = [str(item) for item in ast.literal_eval(cell.strip())]
        except (ValueError, SyntaxError):
            # A torn list literal: split on the quote-comma-quote separators instead.
            pieces = [p.strip("[]'\" ") for p in re.split(r"['\"]\s*,\s*['\"]", cell)]
    found: list[str] = []
    for raw in (match for piece in pieces for match in _LINK_RE.findall(piece)):
        link = normalize_link(raw)
        if link and link not in found:
            found.append(link)
    return found


def _decode(text: str) -> str:
    # Some cells are percent-encoded twice ("Men%2527s"): decode until stable, a few times at most.
    for _ in range(3):
        if not _PERCENT_RE.search(text):
            break
        decoded = unquote(text)
        if decoded == text:
            break
        text = decoded
    return text


def normalize_link(url: str) -> str | None:
    """Canonical ``host/wiki/Title`` form of a Wikipedia URL, or None if it is not one.

    The host keeps its language (``simple.wikipedia.org`` stays distinct) but loses the mobile
    ``.m``; the title is decoded, uses underscores, has no fragment and starts upper-case.
    """
    url = url.strip().rstrip(",/").strip()
    if not url:
        return None
    if "://" not in url:
        url = "https://" + url
    parts = urlsplit(url)
    host = parts.netloc.lower()
    if not host.endswith("wikipedia.org"):
        return None
    host = host.replace(".m.wikipedia.org", ".wikipedia.org")
    if parts.path.startswith("/wiki/"):
        title = parts.path[len("/wiki/") :]
    elif parts.path.startswith("/w/index.php"):
        title = parse_qs(parts.query).get("title", [""])[0]
    else:
        return None
    title = _decode(title).split("#", 1)[0].replace(" ", "_").strip("_")
    if not title:
        return None
    title = title[0].upper() + title[1:]
    if ":" in title and title.split(":", 1)[0] in _NON_ARTICLE_NAMESPACES:
        return None
    return f"{host}/wiki/{title}"


def link_title(link: str) -> str:
    """The article title as Wikipedia spells it (spaces, decoded) for a URL or canonical link."""
    normalized = normalize_link(link) if "/wiki/" in link or "index.php" in link else None
    title = normalized.split("/wiki/", 1)[1] if normalized else _decode(link)
    return title.replace("_", " ").strip()


def title_key(title: str) -> str:
    """A lookup key that treats spaces/underscores, case and Unicode forms alike."""
    text = unicodedata.normalize("NFC", _decode(title)).replace("_", " ")
    return " ".join(text.split()).casefold()
