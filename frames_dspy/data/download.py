"""What a failed download tells the user, and a quick check that a server can be reached.

The questions come from the Hugging Face hub and the articles from Wikipedia when no local copy
is given. Offline, or on a broken network, both end in a :class:`DownloadError`: one line that
names what could not be downloaded, from where, why (the innermost cause, such as "the host name
could not be resolved"), and the two fixes (connect, or point the command at local copies). The
command lines print it and exit with status 2. :func:`unreachable` answers within seconds whether
a server can be reached at all, so a machine without network is told so at once instead of after
a client library's own retry loop.
"""

from __future__ import annotations

import errno
import socket
import ssl
import threading
import urllib.error
import urllib.request
from urllib.parse import urlsplit

__all__ = ["DownloadError", "SERVER_ANSWERED", "reason_of", "unreachable"]

#: Seconds :func:`unreachable` waits for a name lookup and a connection.
PROBE_TIMEOUT = 5.0
#: How a reason begins when the server was reached and refused (an HTTP error status): the
#: network is fine, so the fix is to try again later, not to connect.
SERVER_ANSWERED = "the server answered"


class DownloadError(RuntimeError):
    """A download failed for a network reason.

    Args:
        what: What was being downloaded ("the FRAMES questions (hub dataset ...)").
        source: Where from (a URL).
        reason: Why, in a few words (see :func:`reason_of`).
        fix: What to do instead of connecting (which option or variable names a local copy).
        kept: What was already downloaded and is kept for the next attempt, if anything.
    """

    def __init__(self, what: str, source: str, reason: str, *, fix: str, kept: str = ""):
        self.what, self.source, self.reason = what, source, reason
        kept = f" ({kept})" if kept else ""
        again = (
            "Rerun later"
            if reason.startswith(SERVER_ANSWERED)
            else "Connect to the internet and rerun"
        )
        super().__init__(
            f"could not download {what} from {source}: {reason}. {again}{kept}, or {fix}"
        )


def _causes(error: BaseException) -> list[BaseException]:
    """The error and everything behind it: chained causes, and the ``reason`` or exception
    arguments that urllib, urllib3 and requests wrap their causes in."""
    found: list[BaseException] = []
    queue = [error]
    while queue:
        current = queue.pop(0)
        if any(current is seen for seen in found):
            continue
        found.append(current)
        inner = [current.__cause__, current.__context__, getattr(current, "reason", None)]
        inner.extend(current.args)
        queue.extend(item for item in inner if isinstance(item, BaseException))
    return found


def reason_of(error: BaseException) -> str:
    """A few words on why a download failed, from the innermost network cause of ``error``."""
    causes = _causes(error)
    for cause in reversed(causes):
        if isinstance(cause, socket.gaierror):
            return f"the host name could not be resolved (no network or no DNS: {cause.strerror})"
        if isinstance(cause, ConnectionRefusedError):
            return "the connection was refused (nothing listens there)"
        if isinstance(cause, TimeoutError | socket.timeout):
            return "no answer in time (the network or the server is down or very slow)"
        if isinstance(cause, ssl.SSLError):
            return f"the secure connection failed ({cause.reason or cause})"
        if isinstance(cause, OSError) and cause.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return f"the network is unreachable ({cause.strerror})"
        if isinstance(cause, urllib.error.HTTPError):
            return f"{SERVER_ANSWERED} HTTP {cause.code} {cause.reason}"
    innermost = causes[-1]
    text = " ".join(str(innermost).split()) or type(innermost).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _probe_address(url: str) -> tuple[str, int]:
    """Host and port a request to ``url`` connects to first: its proxy's, if one applies."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(host):
        proxy_parts = urlsplit(proxy if "://" in proxy else "http://" + proxy)
        return proxy_parts.hostname or "", proxy_parts.port or 80
    return host, parts.port or (443 if parts.scheme == "https" else 80)


def unreachable(url: str, *, timeout: float = PROBE_TIMEOUT) -> str | None:
    """Why ``url``'s server (or the proxy in front of it) cannot be reached, or None if it can.

    Looks the name up and opens a TCP connection, nothing more, in at most ``timeout``
    seconds (a name lookup that hangs counts as a failure).
    """
    host, port = _probe_address(url)
    outcome: list[BaseException | None] = []

    def connect() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            outcome.append(None)
        except OSError as err:
            outcome.append(err)

    worker = threading.Thread(target=connect, daemon=True)
    worker.start()
    worker.join(timeout)
    if not outcome:
        return f"no answer from {host}:{port} within {timeout:g} s"
    error = outcome[0]
    return None if error is None else reason_of(error)
