"""Credentials kept out of everything a run writes: URLs, settings, commands and logs.

A password or token reaches a run through its settings (``--api-base``, ``--mlflow``,
``--storage``, ``--wiki-api``), through the command line and through LiteLLM's key settings
(``api_key`` and the like, in a notebook's own LM). Every file a run writes (``config.json``,
``summary.json``, ``report.html``, the lock file's command), every MLflow parameter and every
log line goes through this module first, so none of them holds one:

- a URL keeps its user name but not its password (``postgresql://u:***@host/db``);
- a query-string value whose name says it is secret (``?key=``, ``api_key=``, ``token=``,
  ``sig=``...) becomes ``***``;
- a setting whose name says it is secret (``api_key``, ``aws_secret_access_key``,
  ``vertex_credentials``...) becomes ``***``.

Anything that is not a URL is left as it is.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["MASK", "is_secret_name", "redact", "redact_text", "redact_settings", "RedactingFilter"]

#: What stands in for a secret.
MASK = "***"

# A name that ends in one of these words (alone, or after _ - or .) holds a secret:
# api_key, x-api-key, access_token, client_secret, aws_secret_access_key, sig... but not
# max_tokens or context_tokens (plural counts).
_SECRET_NAME = re.compile(
    r"(?:^|[_.-])(?:api_?key|apikey|key|token|secret|password|passwd|pwd|auth|authorization"
    r"|credentials?|sig|signature)$",
    re.IGNORECASE,
)
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#]*)(.*)$", re.DOTALL)


def is_secret_name(name: str) -> bool:
    """Whether a setting or query parameter of this name holds a secret."""
    return bool(_SECRET_NAME.search(str(name).strip()))


def _query(query: str) -> str:
    parts = []
    for part in query.split("&"):
        name, sep, value = part.partition("=")
        if sep and value and is_secret_name(name):
            value = MASK
        parts.append(f"{name}{sep}{value}")
    return "&".join(parts)


def redact(url: str) -> str:
    """``url`` without its password or secret query values (for logs and run files).

    ``postgresql://frames:hunter2@db/optuna`` becomes ``postgresql://frames:***@db/optuna``
    and ``https://host/v1?key=abc`` becomes ``https://host/v1?key=***``; a string that is not
    a URL (a path, ``study.db``) is returned as given.
    """
    match = _SCHEME.match(url) if isinstance(url, str) else None
    if match is None:
        return url
    scheme, netloc, rest = match.groups()
    userinfo, at, host = netloc.rpartition("@")
    if at and ":" in userinfo:
        user, _, password = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{host}" if password else netloc
    path, hash_, fragment = rest.partition("#")
    path, question, query = path.partition("?")
    if question:
        path = f"{path}?{_query(query)}"
    return f"{scheme}{netloc}{path}{hash_}{fragment}"


def redact_text(text: str) -> str:
    """``text`` (a command, an error message, a log line) with every URL in it redacted."""
    if not isinstance(text, str) or "://" not in text:
        return text
    return _URL.sub(lambda match: redact(match.group(0)), text)


def redact_settings(value: Any) -> Any:
    """A copy of ``value`` (settings, a run's config, MLflow parameters) without secrets.

    Mappings are walked: an entry whose key names a secret is masked, other strings have
    their URLs redacted, lists and tuples are walked item by item. The input is not changed.
    """
    if isinstance(value, Mapping):
        return {
            key: MASK if is_secret_name(key) and _value_set(inner) else redact_settings(inner)
            for key, inner in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(redact_settings(item) for item in value)
    if isinstance(value, str):
        return redact_text(value)
    return value


def _value_set(value: Any) -> bool:
    # An empty or missing secret shows as it is: it says no key was given.
    return value not in (None, "", {}, [])


class RedactingFilter(logging.Filter):
    """A logging filter that redacts the URLs of every record it passes (put it on a handler)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True
