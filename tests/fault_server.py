"""A small OpenAI-compatible chat server that fails on purpose, for the fault tests.

It listens on 127.0.0.1 only, answers ``POST /v1/chat/completions`` in DSPy's chat format
(it reads the output fields a prompt asks for and fills them), and injects faults: HTTP 500,
HTTP 429 (with ``Retry-After: 0`` unless told otherwise) and stalls longer than the client's
timeout. Whether the n-th try of a given request fails is drawn from a random stream seeded
by the request's content and n, so it does not depend on which thread asks first, and no
request fails more than ``max_faults`` times in a row: a client that retries that often always
gets through. A prompt that contains :data:`POISON` always gets a 500, so its question fails
for good. Every request and every injected fault is counted. The server stops by itself after
``lifetime`` seconds, so a test that dies cannot leave it running.

Run it alone with ``python tests/fault_server.py --port 0`` (it prints its URL).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: A question containing this word always fails with HTTP 500.
POISON = "POISONED"
#: The model name a client asks the server for (an OpenAI-compatible one, via LiteLLM).
MODEL = "openai/fault-model"

_FIELD = re.compile(r"^\d+\. `(\w+)` \(([^)]*)\)", re.MULTILINE)
_SECTION = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## |\Z)", re.DOTALL)


def _reply(messages: list[dict]) -> str:
    """Fill the output fields the prompt asks for: an answer, queries, or a judge verdict."""
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    asked = system.split("Your output fields are:")[-1].split("All interactions")[0]
    fields = _FIELD.findall(asked)
    last = messages[-1]["content"] if messages else ""
    inputs = dict(_SECTION.findall(last))
    parts = []
    for name, kind in fields or [("answer", "str")]:
        if name == "decision":
            value = "TRUE" if "Paris" in inputs.get("response", "") else "FALSE"
        elif name == "queries":
            question = inputs.get("question", "capital")
            value = json.dumps([" ".join(question.split()[:4])])
        elif name in ("explanation", "plan", "reasoning"):
            value = "Compared the two."
        elif "int" in kind:
            value = "1"
        else:
            value = "Paris"
        parts.append(f"[[ ## {name} ## ]]\n{value}")
    parts.append("[[ ## completed ## ]]")
    return "\n\n".join(parts)


class FaultServer:
    """The server and its counters; use it as a context manager.

    Args:
        p_500, p_429, p_stall: Shares of requests that get each fault.
        stall: Seconds a stalled request sleeps before answering (set it above the client's
            timeout).
        seed: Seed of the fault stream.
        max_faults: Tries of one request that may fail before it is answered.
        retry_after: The ``Retry-After`` header of a 429 (None: no header, so the client
            chooses its own backoff).
        lifetime: Seconds after which the server shuts itself down.
        latency: Seconds every request waits before it is answered (a slow model).
    """

    def __init__(
        self,
        *,
        p_500: float = 0.12,
        p_429: float = 0.08,
        p_stall: float = 0.04,
        stall: float = 3.0,
        seed: int = 0,
        max_faults: int = 2,
        retry_after: str | None = "0",
        lifetime: float = 600.0,
        port: int = 0,
        latency: float = 0.0,
    ):
        self.latency = latency
        self.p_500, self.p_429, self.p_stall, self.stall = p_500, p_429, p_stall, stall
        self.counts: Counter[str] = Counter()
        self.seed, self.max_faults, self.retry_after = seed, max_faults, retry_after
        self._tries: Counter[str] = Counter()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                fault = server._draw(body)
                time.sleep(server.latency)
                if fault == "stall":
                    time.sleep(server.stall)
                if fault in ("500", "poison"):
                    return self._send(500, {"error": {"message": "injected server error"}})
                if fault == "429":
                    hint = {"Retry-After": server.retry_after} if server.retry_after else {}
                    return self._send(429, {"error": {"message": "injected rate limit"}}, hint)
                content = _reply(body.get("messages") or [])
                prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
                return self._send(
                    200,
                    {
                        "id": "chatcmpl-fault",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "fault-model"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": prompt // 4,
                            "completion_tokens": len(content) // 4,
                            "total_tokens": (prompt + len(content)) // 4,
                        },
                    },
                )

            def _send(self, status, payload, headers=None):
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    server._count("client gone")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._timer = threading.Timer(lifetime, self.close)
        self._timer.daemon = True

    def _count(self, key: str) -> None:
        with self._lock:
            self.counts[key] += 1

    def _draw(self, body: dict) -> str | None:
        text = json.dumps(body.get("messages", []), sort_keys=True)
        key = hashlib.sha1(text.encode()).hexdigest()
        with self._lock:
            self.counts["requests"] += 1
            if POISON in text:
                self.counts["poison"] += 1
                return "poison"
            tries = self._tries[key]
            self._tries[key] += 1
            if tries >= self.max_faults:
                self.counts["ok"] += 1
                return None
            roll = random.Random(f"{self.seed}:{key}:{tries}").random()
            for fault, share in (("500", self.p_500), ("429", self.p_429), ("stall", self.p_stall)):
                if roll < share:
                    self.counts[fault] += 1
                    return fault
                roll -= share
            self.counts["ok"] += 1
            return None

    @property
    def injected(self) -> int:
        """Faults injected so far (poisoned requests included)."""
        return sum(self.counts[k] for k in ("500", "429", "stall", "poison"))

    def __enter__(self) -> FaultServer:
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._timer.cancel()
        self.httpd.shutdown()
        self.httpd.server_close()


def evaluate_command(server: FaultServer, *args: str) -> list[str]:
    """``python -m frames_dspy.evaluate`` with the server's model, no LM cache and no progress
    lines: the command line the subprocess tests run, ``args`` (data, conditions, folder) after.
    """
    return [
        sys.executable, "-m", "frames_dspy.evaluate", "--model", MODEL, "--api-base", server.url,
        "--cache", "off", "--quiet", *args,
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description="An OpenAI-compatible server that fails")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--lifetime", type=float, default=600.0)
    args = parser.parse_args()
    with FaultServer(port=args.port, lifetime=args.lifetime) as server:
        print(server.url, flush=True)
        server._thread.join()


if __name__ == "__main__":
    main()
