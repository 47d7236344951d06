"""Why a download failed, in a few words, and the quick reachability check."""

from __future__ import annotations

import socket
import urllib.error

import pytest

from frames_dspy.data.download import DownloadError, reason_of, unreachable
from tests.ports import dead_url


def _chained(inner: BaseException) -> BaseException:
    """``inner`` wrapped the way client libraries wrap it: a reason, then a chained cause."""
    try:
        try:
            raise urllib.error.URLError(inner)
        except urllib.error.URLError as err:
            raise RuntimeError("An error happened while trying to locate the file") from err
    except RuntimeError as outer:
        return outer


@pytest.mark.parametrize(
    "inner, words",
    [
        (socket.gaierror(-2, "Name or service not known"), "host name could not be resolved"),
        (ConnectionRefusedError(111, "Connection refused"), "connection was refused"),
        (TimeoutError("timed out"), "no answer in time"),
        (OSError(101, "Network is unreachable"), "network is unreachable"),
    ],
)
def test_reason_names_the_innermost_cause(inner, words):
    assert words in reason_of(_chained(inner))


def test_reason_of_an_http_error_names_the_status():
    error = urllib.error.HTTPError("http://x", 503, "Service Unavailable", None, None)
    assert reason_of(error) == "the server answered HTTP 503 Service Unavailable"


def test_reason_of_anything_else_is_its_message_on_one_line():
    assert reason_of(RuntimeError("bad\n  thing")) == "bad thing"
    assert len(reason_of(RuntimeError("x" * 500))) == 200


def test_the_error_is_one_line_with_both_fixes():
    error = DownloadError(
        "the questions",
        "https://hub",
        "the connection was refused",
        fix="point --dataset at a local copy",
        kept="3 are cached",
    )
    assert str(error) == (
        "could not download the questions from https://hub: the connection was refused. "
        "Connect to the internet and rerun (3 are cached), or point --dataset at a local copy"
    )
    assert error.what == "the questions" and error.source == "https://hub"


def test_a_server_that_answered_with_an_error_is_retried_later_not_connected_to():
    error = urllib.error.HTTPError("http://x", 503, "Service Unavailable", None, None)
    message = str(DownloadError("the questions", "https://hub", reason_of(error), fix="use a copy"))
    assert message == (
        "could not download the questions from https://hub: the server answered HTTP 503 "
        "Service Unavailable. Rerun later, or use a copy"
    )


def test_unreachable_says_why_and_reachable_is_none(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert "refused" in unreachable(dead_url() + "/w/api.php")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert unreachable(f"http://127.0.0.1:{server.getsockname()[1]}/x") is None


def test_unreachable_checks_the_proxy_when_one_applies(monkeypatch):
    monkeypatch.setenv("https_proxy", dead_url())
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    # The target itself is never contacted: only the (dead) proxy is.
    assert "refused" in unreachable("https://huggingface.co")
