"""The Hugging Face hub as the snapshot stream meets it: reaching it, and retrying what failed.

``huggingface_hub`` retries a file read five times over about 20 seconds (429, 5xx, a dropped or
refused connection), but not its metadata calls (a revision's info, the README's check), and
``datasets`` adds its own retries only for some errors of some clients. What is left reaches this
module: :func:`transient` says whether a failure is worth another try (a rate limit, a server
error, a network error of whichever HTTP client raised it), :func:`retrying` tries a call again
after each of :data:`RETRY_WAITS` (longer if the server's ``Retry-After`` asks), and
:func:`unreachable_reason` answers in seconds whether the hub can be asked at all, so an offline
machine is told so at once instead of after every retry.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from frames_dspy.data.download import SERVER_ANSWERED, reason_of, unreachable

logger = logging.getLogger(__name__)

__all__ = [
    "MAX_RETRY_AFTER",
    "RETRY_WAITS",
    "endpoint",
    "offline_mode",
    "reason",
    "retry_wait",
    "retrying",
    "transient",
    "unreachable_reason",
]

#: Seconds to wait before each retry of a call (or a stream) that failed for a network reason
#: the hub client did not retry away.
RETRY_WAITS = (5.0, 20.0, 60.0)
#: The longest ``Retry-After`` obeyed (a longer one is a sign to stop and resume later).
MAX_RETRY_AFTER = 300.0
T = TypeVar("T")


def endpoint() -> str:
    """The hub's address (``HF_ENDPOINT``, read when ``huggingface_hub`` is imported)."""
    from huggingface_hub import constants

    return constants.ENDPOINT


def offline_mode() -> bool:
    """Is ``HF_HUB_OFFLINE`` set? (``huggingface_hub`` 1.x asks a function, 0.x a constant.)"""
    from huggingface_hub import constants

    asks = getattr(constants, "is_offline_mode", None)
    return bool(asks()) if callable(asks) else bool(constants.HF_HUB_OFFLINE)


def unreachable_reason(url: str | None = None) -> str | None:
    """Why the hub (or ``url``) cannot be asked now (offline mode, no network), found in
    seconds; None if it can."""
    return "HF_HUB_OFFLINE is set" if offline_mode() else unreachable(url or endpoint())


def _network_errors() -> tuple[type[BaseException], ...]:
    """The errors of a failed connection or transfer, from whichever HTTP clients are loaded."""
    errors: list[type[BaseException]] = [ConnectionError, TimeoutError]
    for module, name in (
        ("httpx", "TransportError"),
        ("httpx2", "TransportError"),
        ("requests", "ConnectionError"),
        ("requests", "Timeout"),
        ("requests.exceptions", "ChunkedEncodingError"),
        ("aiohttp", "ClientError"),
    ):
        found = getattr(sys.modules.get(module), name, None)
        if isinstance(found, type) and issubclass(found, BaseException):
            errors.append(found)
    return tuple(errors)


def _causes(error: BaseException) -> Iterator[BaseException]:
    seen: list[BaseException] = []
    while error is not None and not any(error is s for s in seen):
        seen.append(error)
        yield error
        error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)


def _status(error: BaseException) -> int | None:
    for cause in _causes(error):
        status = getattr(getattr(cause, "response", None), "status_code", None)
        if isinstance(status, int):
            return status
    return None


def transient(error: BaseException) -> bool:
    """A failure worth retrying: a rate limit, a server error, a dropped or refused connection."""
    status = _status(error)
    if status is not None:
        return status in (408, 429) or status >= 500
    network = _network_errors()
    return any(isinstance(cause, network) for cause in _causes(error))


def retry_wait(error: BaseException, planned: float) -> float:
    """The planned wait, or the server's ``Retry-After`` if it asks for longer (capped)."""
    for cause in _causes(error):
        headers = getattr(getattr(cause, "response", None), "headers", None) or {}
        try:
            return max(planned, min(float(headers.get("Retry-After", "")), MAX_RETRY_AFTER))
        except ValueError:
            continue
    return planned


def retrying(what: str, action: Callable[[], T], *, waits: tuple[float, ...] | None = None) -> T:
    """``action()``, tried again after each of ``waits`` (default :data:`RETRY_WAITS`) while it
    fails for a network reason; the last failure is raised as it is."""
    for wait in (*(RETRY_WAITS if waits is None else waits), None):
        try:
            return action()
        except Exception as err:
            if wait is None or not transient(err):
                raise
            wait = retry_wait(err, wait)
            logger.warning("%s failed (%s); retrying in %.0f s", what, reason(err), wait)
            time.sleep(wait)
    raise AssertionError("unreachable")  # the loop returns or raises


def reason(err: BaseException) -> str:
    """A few words on why a hub call failed: the HTTP status it answered, or the network cause."""
    status = _status(err)
    return f"{SERVER_ANSWERED} HTTP {status}" if status else reason_of(err)
