"""Ports on 127.0.0.1 for the tests: one free for a server a test starts, and a URL nobody
answers (the port is released at once, so a connection to it is refused)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port no one listens on now (another process may take it, rarely, before the test)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def dead_url() -> str:
    """``http://127.0.0.1:PORT`` on a port nobody listens on."""
    return f"http://127.0.0.1:{free_port()}"
