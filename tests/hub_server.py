"""A local server on 127.0.0.1 that answers like the Hugging Face hub, for the hub paths' tests.

It speaks the part of the hub's HTTP API that ``huggingface_hub`` (``HfApi``, ``hf_hub_download``,
``HfFileSystem``) and ``datasets`` (its hub module factory and parquet streaming) call, found by
reading them:

* ``GET /api/datasets/{repo}`` and ``/api/datasets/{repo}/revision/{rev}``: the repo's info at a
  revision (``sha``, ``siblings``, ``cardData``), as ``HfApi.dataset_info`` and
  ``HfFileSystem.resolve_path`` read it;
* ``GET /api/datasets/{repo}/tree/{rev}[/{path}]`` (``recursive``): the files and folders under a
  path, as ``list_repo_tree`` and ``HfFileSystem.ls``/``glob`` read them;
* ``POST /api/datasets/{repo}/paths-info/{rev}``: the entries of the paths asked for;
* ``HEAD``/``GET /datasets/{repo}/resolve/{rev}/{path}``: a file, with ``X-Repo-Commit`` and
  ``ETag``; a large-file-storage file (every ``.parquet``) answers ``302`` to the *CDN*, a second
  listener on another port (another origin, as the real CDN is another host), with
  ``X-Linked-Size`` and ``X-Linked-Etag``; the CDN serves ``Range`` requests (``206``, or ``416``
  past the end).

A missing repo answers 401 ``RepoNotFound``, a missing revision 404 ``RevisionNotFound``, a
missing file 404 ``EntryNotFound`` (the ``X-Error-Code`` header the client reads). Every
:meth:`HubServer.commit` makes a new commit on ``main`` (a 40-hex ``sha``); older commits stay
addressable by their hash, so a test can show that pinning a revision matters.

Faults are queued and deterministic: :meth:`HubServer.fail` makes the next N matching requests
answer an HTTP status (429 with ``Retry-After``, 5xx), :meth:`HubServer.drop` cuts the next N
matching file bodies after a number of bytes (the connection is closed mid-transfer), and
:meth:`HubServer.stop` / :meth:`HubServer.start` stop and restart both listeners on the same ports
(open connections are cut, as a crash would). Requests, statuses and the bytes of each file's body
written to the socket are counted. The server stops by itself after ``lifetime`` seconds or
``max_requests`` requests.

:func:`wikipedia_files` makes a ``wikimedia/wikipedia``-shaped repo (a README whose YAML lists the
configs and their ``data_files``, parquet shards ``{config}/train-0000N-of-0000M.parquet`` with the
columns ``id``, ``url``, ``title``, ``text``), with the articles of
``tests/fixtures/eval_corpus.jsonl`` among generated ones; :func:`frames_files` a
``google/frames-benchmark`` with a ``test.tsv`` made from ``tests/fixtures/eval_frames.csv``.

Point the libraries at it with ``HF_ENDPOINT`` (read when ``huggingface_hub`` and ``datasets`` are
imported, so run the product in a subprocess with it set, as a user would). Run it alone with
``python tests/hub_server.py`` (it prints its endpoint).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import io
import json
import os
import random
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[1]
WIKIPEDIA = "wikimedia/wikipedia"
FRAMES = "google/frames-benchmark"
_LFS_SUFFIXES = (".parquet",)
#: How near its end a range must start to count as a footer read (parquet readers ask 64 KiB).
TAIL = 1 << 17
_SHA = re.compile(r"^[0-9a-f]{40}$")
_FILLER_WORDS = (
    "river", "mountain", "castle", "novel", "league",
    "season", "album", "painter", "railway", "election",
)  # fmt: skip


def _git_oid(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


@dataclass
class Commit:
    sha: str
    files: dict[str, bytes]
    title: str
    date: str


@dataclass
class Fault:
    """What the next matching request gets: an HTTP status, or its body cut after ``drop`` bytes."""

    match: str
    times: int
    status: int = 0
    retry_after: str | None = None
    drop: int | None = None


@dataclass
class Counts:
    """What the server did: requests by ``METHOD path``, statuses, body bytes written per file
    (and, of those, ``tail`` bytes: ranges within a file's last :data:`TAIL` bytes that run to
    its end, which is where a parquet reader looks for the footer)."""

    requests: list[tuple[str, str, str]] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)
    bytes: Counter = field(default_factory=Counter)
    tail: Counter = field(default_factory=Counter)
    faults: Counter = field(default_factory=Counter)

    def files_bytes(self, suffix: str = ".parquet", *, tails: bool = True) -> int:
        """Body bytes served of the files ending in ``suffix`` (without footer reads)."""
        counts = self.bytes - (Counter() if tails else self.tail)
        return sum(n for path, n in counts.items() if path.endswith(suffix))


class HubServer:
    """Repos, commits and queued faults behind a local hub API and CDN; a context manager.

    Args:
        lifetime: Seconds after which both listeners stop for good.
        max_requests: Requests after which both listeners stop for good.
    """

    def __init__(self, *, lifetime: float = 120.0, max_requests: int = 20_000) -> None:
        self.repos: dict[str, list[Commit]] = {}
        self._objects: dict[str, tuple[str, bytes]] = {}  # the CDN's: sha256 -> (name, content)
        self.faults: list[Fault] = []
        self.counts = Counts()
        self.max_requests = max_requests
        self._lock = threading.Lock()
        self._servers: list[ThreadingHTTPServer] = []
        self._sockets: set[socket.socket] = set()
        self._ports = (0, 0)
        self._over = False
        self._outage: tuple[int, float | None] | None = None
        self._timer = threading.Timer(lifetime, self.close)
        self._timer.daemon = True

    # --- content --------------------------------------------------------------------------------

    def commit(self, repo: str, files: dict[str, bytes], title: str = "update") -> str:
        """A new commit on ``main`` of dataset ``repo``: the last commit's files updated by
        ``files`` (a value of ``b""`` deletes that file). Returns its 40-hex sha."""
        with self._lock:
            history = self.repos.setdefault(repo, [])
            tree = dict(history[-1].files) if history else {}
            for path, content in files.items():
                if content == b"" and path in tree:
                    del tree[path]
                else:
                    tree[path] = content
            digest = hashlib.sha1(f"{repo}\0{len(history)}\0{title}".encode())
            for path in sorted(tree):
                digest.update(f"{path}\0{_git_oid(tree[path])}\0".encode())
            sha = digest.hexdigest()
            date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1.7e9 + len(history)))
            history.append(Commit(sha, tree, title, date))
            for path, content in tree.items():
                if path.endswith(_LFS_SUFFIXES):
                    self._objects[hashlib.sha256(content).hexdigest()] = (f"{repo}/{path}", content)
            return sha

    def sha(self, repo: str, revision: str = "main") -> str:
        commit = self._commit(repo, revision)
        assert commit is not None, (repo, revision)
        return commit.sha

    def _commit(self, repo: str, revision: str) -> Commit | None:
        history = self.repos.get(repo) or []
        if revision == "main" and history:
            return history[-1]
        return next((c for c in history if c.sha == revision), None)

    # --- faults -------------------------------------------------------------------------------

    def fail(
        self, status: int, *, times: int = 1, retry_after: str | None = "0", match: str = ""
    ) -> None:
        """The next ``times`` requests that ``match`` answer HTTP ``status``: ``match`` is looked
        for in the request's path and, for a read of the CDN, in ``<repo>/<file> data`` or
        ``<repo>/<file> footer`` (a range in the file's last :data:`TAIL` bytes)."""
        with self._lock:
            self.faults.append(Fault(match, times, status=status, retry_after=retry_after))

    def drop(self, after: int, *, times: int = 1, match: str = ".parquet") -> None:
        """The next ``times`` file bodies whose path contains ``match`` stop after ``after``
        bytes: the connection is closed with the body unfinished."""
        with self._lock:
            self.faults.append(Fault(match, times, drop=after))

    def outage(self, after: int, *, down: float | None = None) -> None:
        """Stop both listeners once ``after`` bytes of parquet have been served (open transfers
        are cut), and start them again on the same ports ``down`` seconds later (None: stay
        down until :meth:`start` is called)."""
        with self._lock:
            self._outage = (after, down)

    def _check_outage(self) -> None:
        with self._lock:
            if self._outage is None or self.counts.files_bytes() < self._outage[0]:
                return
            down, self._outage = self._outage[1], None
        self.counts.faults["outage"] += 1

        def stop_and_restart() -> None:
            self.stop()
            if down is not None and not self._over:
                time.sleep(down)
                self.start()

        threading.Thread(target=stop_and_restart, daemon=True).start()

    def _fault(self, path: str, *, body: bool) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.match in path and (fault.drop is not None) == body:
                    fault.times -= 1
                    if fault.times <= 0:
                        self.faults.remove(fault)
                    self.counts.faults[fault.status or "drop"] += 1
                    return fault
        return None

    # --- the listeners ------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._ports[0]}"

    @property
    def cdn(self) -> str:
        return f"http://127.0.0.1:{self._ports[1]}"

    def start(self) -> HubServer:
        """Listen (again, on the same ports after :meth:`stop`)."""
        if self._over:
            raise RuntimeError("the hub server's lifetime is over")
        servers = []
        for port in self._ports:
            server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
            server.daemon_threads = True
            servers.append(server)
        self._servers = servers
        self._ports = tuple(s.server_address[1] for s in servers)
        for server in servers:
            kwargs = {"poll_interval": 0.02}
            threading.Thread(target=server.serve_forever, kwargs=kwargs, daemon=True).start()
        if not self._timer.is_alive():
            self._timer.start()
        return self

    def stop(self) -> None:
        """Stop listening and cut every open connection (the ports are kept for a restart)."""
        for server in self._servers:
            server.shutdown()
            server.server_close()
        with self._lock:
            open_sockets, self._sockets = list(self._sockets), set()
        for sock in open_sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._servers = []

    def close(self) -> None:
        """Stop for good (the lifetime or request budget is over, or the test is done)."""
        self._over = True
        self._timer.cancel()
        self.stop()

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # --- answers ------------------------------------------------------------------------------

    def _info(self, repo: str, commit: Commit) -> dict:
        card = _card_data(commit.files.get("README.md", b""))
        siblings = [{"rfilename": path} for path in sorted(commit.files)]
        created = self.repos[repo][0].date
        return {
            **{"_id": hashlib.sha1(repo.encode()).hexdigest()[:24], "id": repo, "sha": commit.sha},
            **{"author": repo.split("/")[0], "lastModified": commit.date, "createdAt": created},
            **{"private": False, "gated": False, "disabled": False, "downloads": 0, "likes": 0},
            **{"tags": [], "cardData": card, "siblings": siblings},
        }

    def _entry(self, commit: Commit, path: str, expand: bool) -> dict | None:
        content = commit.files.get(path)
        if content is not None:
            entry = {"type": "file", "oid": _git_oid(content), "size": len(content), "path": path}
            if path.endswith(_LFS_SUFFIXES):
                sha256 = hashlib.sha256(content).hexdigest()
                entry["lfs"] = {"oid": sha256, "size": len(content), "pointerSize": 134}
        elif any(p.startswith(path + "/") for p in commit.files):
            oid = hashlib.sha1(f"tree {commit.sha} {path}".encode()).hexdigest()
            entry = {"type": "directory", "oid": oid, "size": 0, "path": path}
        else:
            return None
        if expand:
            entry["lastCommit"] = {"id": commit.sha, "title": commit.title, "date": commit.date}
        return entry

    def _tree(self, commit: Commit, path: str, recursive: bool, expand: bool) -> list[dict] | None:
        prefix = path.strip("/") + "/" if path.strip("/") else ""
        if prefix and self._entry(commit, prefix[:-1], False) is None:
            return None
        names = set()
        for name in commit.files:
            if not name.startswith(prefix):
                continue
            parts = name[len(prefix) :].split("/")
            for depth in range(1, len(parts) + 1 if recursive else 2):
                names.add(prefix + "/".join(parts[:depth]))
        entries = [self._entry(commit, name, expand) for name in sorted(names)]
        return sorted(entries, key=lambda e: (e["type"] != "directory", e["path"]))

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                with hub._lock:
                    hub._sockets.add(self.connection)

            def finish(self):
                with hub._lock:
                    hub._sockets.discard(self.connection)
                with contextlib.suppress(OSError):
                    super().finish()

            def log_message(self, *args):
                pass

            def do_HEAD(self):
                self._answer("HEAD")

            def do_GET(self):
                self._answer("GET")

            def do_POST(self):
                self._answer("POST")

            def _answer(self, method: str) -> None:
                parts = urlsplit(self.path)
                with hub._lock:
                    hub.counts.requests.append((method, parts.path, self.headers.get("Range", "")))
                    over = len(hub.counts.requests) > hub.max_requests
                if over:
                    threading.Thread(target=hub.close, daemon=True).start()
                    self.close_connection = True
                    return
                length = int(self.headers.get("Content-Length") or 0)
                form = parse_qs(self.rfile.read(length).decode()) if length else {}
                on_cdn = self.server.server_address[1] == hub._ports[1]
                cdn_file = hub._objects.get(parts.path.rsplit("/", 1)[-1]) if on_cdn else None
                seen = f"{parts.path} {self._part(cdn_file)}"
                fault = hub._fault(seen, body=False)
                if fault is not None and fault.status:
                    headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
                    self._json(fault.status, {"error": f"injected {fault.status}"}, headers)
                    return
                try:
                    if on_cdn:
                        self._cdn(method, parts.path, cdn_file)
                    else:
                        self._hub(method, parts.path, {**parse_qs(parts.query), **form})
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def _part(self, found: tuple[str, bytes] | None) -> str:
                """``<repo>/<file> data`` or ``... footer`` for a CDN read, else nothing."""
                if found is None:
                    return ""
                span = re.match(r"^bytes=(\d+)-", self.headers.get("Range", ""))
                tail = span is not None and int(span.group(1)) > len(found[1]) - TAIL
                return f"{found[0]} {'footer' if tail else 'data'}"

            def _hub(self, method: str, path: str, query: dict[str, list[str]]) -> None:
                flag = lambda name: query.get(name, ["false"])[0].lower() in ("1", "true")  # noqa: E731
                api = re.match(
                    r"^/api/datasets/([^/]+/[^/]+)(?:/(revision|tree|paths-info)/([^/]+)(/.*)?)?$",
                    path,
                )
                resolve = re.match(r"^/datasets/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
                match = api or resolve
                if match is None:
                    return self._json(404, {"error": "not a hub endpoint"})
                repo = match.group(1)
                revision = unquote((api.group(3) if api else resolve.group(2)) or "main")
                if repo not in hub.repos:
                    return self._error(401, "RepoNotFound", f"Repository {repo} not found")
                commit = hub._commit(repo, revision)
                if commit is None:
                    return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
                if resolve is not None:
                    return self._resolve(method, repo, commit, unquote(resolve.group(3)))
                kind, rest = api.group(2), unquote(api.group(4) or "")
                if kind in (None, "revision"):
                    return self._json(200, hub._info(repo, commit))
                if kind == "tree":
                    entries = hub._tree(commit, rest, flag("recursive"), flag("expand"))
                    if entries is None:
                        return self._error(404, "EntryNotFound", f"{rest} does not exist")
                    return self._json(200, entries)
                entries = [
                    hub._entry(commit, p.strip("/"), flag("expand")) for p in query.get("paths", [])
                ]
                return self._json(200, [e for e in entries if e is not None])

            def _resolve(self, method: str, repo: str, commit: Commit, path: str) -> None:
                content = commit.files.get(path)
                if content is None:
                    return self._error(404, "EntryNotFound", f"{path} does not exist")
                headers = {"X-Repo-Commit": commit.sha, "ETag": f'"{_git_oid(content)}"'}
                if path.endswith(_LFS_SUFFIXES):
                    sha256 = hashlib.sha256(content).hexdigest()
                    headers |= {
                        "Location": f"{hub.cdn}/lfs/{sha256}",
                        "X-Linked-Size": str(len(content)),
                        "X-Linked-Etag": f'"{sha256}"',
                    }
                    return self._send(302, b"", headers, method=method)
                self._file(method, f"{repo}/{path}", content, headers)

            def _cdn(self, method: str, path: str, found: tuple[str, bytes] | None) -> None:
                if found is None or not path.startswith("/lfs/"):
                    return self._json(404, {"error": "no such object"})
                name, content = found
                self._file(method, name, content, {"ETag": f'"{path.rsplit("/", 1)[-1]}"'})

            def _file(self, method: str, name: str, content: bytes, headers: dict) -> None:
                status, body = 200, content
                asked = self.headers.get("Range")
                if asked:
                    span = re.match(r"^bytes=(\d*)-(\d*)$", asked.strip())
                    first, last = (span.group(1), span.group(2)) if span else ("", "")
                    if first == "":
                        start, end = max(len(content) - int(last or 0), 0), len(content) - 1
                    else:
                        start = int(first)
                        end = min(int(last), len(content) - 1) if last else len(content) - 1
                    if start >= len(content):
                        cr = {"Content-Range": f"bytes */{len(content)}"}
                        return self._send(416, b"", cr, method=method)
                    status, body = 206, content[start : end + 1]
                    headers = {**headers, "Content-Range": f"bytes {start}-{end}/{len(content)}"}
                headers = {
                    **headers,
                    "Accept-Ranges": "bytes",
                    "Content-Type": "application/octet-stream",
                }
                tail = status == 206 and start > len(content) - TAIL and end == len(content) - 1
                self._send(status, body, headers, method=method, name=name, tail=tail)

            def _error(self, status: int, code: str, message: str) -> None:
                self._json(
                    status, {"error": message}, {"X-Error-Code": code, "X-Error-Message": message}
                )

            def _json(self, status: int, payload, headers: dict | None = None) -> None:
                data = json.dumps(payload).encode()
                self._send(status, data, {"Content-Type": "application/json", **(headers or {})})

            def _send(self, status, body, headers, *, method="GET", name=None, tail=False):
                with hub._lock:
                    hub.counts.statuses[status] += 1
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command == "HEAD" or not body:
                    return
                fault = hub._fault(name or "", body=True) if name else None
                sent = body if fault is None else body[: fault.drop]
                self.wfile.write(sent)
                self.wfile.flush()
                if name:
                    with hub._lock:
                        hub.counts.bytes[name] += len(sent)
                        hub.counts.tail[name] += len(sent) if tail else 0
                    hub._check_outage()
                if fault is not None:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)

        return Handler


# --- the repos ---------------------------------------------------------------------------------


def _card_data(readme: bytes) -> dict:
    import yaml

    text = readme.decode("utf-8")
    if not text.startswith("---\n"):
        return {}
    return yaml.safe_load(text[4:].split("\n---", 1)[0]) or {}


def articles(n: int, *, edition: int = 0, words: int = 60) -> list[dict[str, str]]:
    """``n`` articles: the eval fixture's 9 among generated ones of ``words`` words drawn from a
    few hundred (seeded by position and ``edition``, so the parquet does not compress to
    nothing and its files are larger than a footer read)."""
    real = [json.loads(x) for x in (FIXTURES / "eval_corpus.jsonl").open(encoding="utf-8")]
    syllables = ("ka", "lo", "mi", "ru", "te", "sa", "no", "vi", "de", "po")
    vocabulary = [*_FILLER_WORDS, *(a + b + c for a in syllables for b in syllables for c in "nrs")]
    rows = []
    for i in range(n):
        if i % 97 == 13 and real:
            article = real.pop(0)
            title, text = article["title"], article["text"]
        else:
            pick = random.Random(f"{edition}:{i}")
            title, text = f"Filler {i}", " ".join(pick.choices(vocabulary, k=words))
        url = "https://en.wikipedia.org/wiki/" + title.replace(" ", "_")
        rows.append({"id": str(1000 + i), "url": url, "title": title, "text": text})
    return rows


def wikipedia_files(
    configs: dict[str, int],
    *,
    shards: int = 3,
    row_group_size: int = 100,
    edition: int = 0,
    words: int = 60,
) -> dict[str, bytes]:
    """A ``wikimedia/wikipedia``-shaped repo: ``{config: articles}`` as parquet shards and a
    README whose YAML lists each config's ``data_files`` and article count (as the real card)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files: dict[str, bytes] = {}
    card = ["---", "configs:"]
    infos = ["dataset_info:"]
    for config, n in configs.items():
        rows = articles(n, edition=edition, words=words)
        step = -(-n // shards)
        for k in range(shards):
            part = pa.Table.from_pylist(rows[k * step : (k + 1) * step])
            sink = io.BytesIO()
            pq.write_table(part, sink, row_group_size=row_group_size)
            files[f"{config}/train-{k:05d}-of-{shards:05d}.parquet"] = sink.getvalue()
        card += [
            f"- config_name: {config}",
            "  data_files:",
            "  - split: train",
            f"    path: {config}/train-*",
        ]
        infos += [
            f"- config_name: {config}",
            "  features:",
            *[f"  - name: {c}\n    dtype: string" for c in ("id", "url", "title", "text")],
            "  splits:",
            "  - name: train",
            f"    num_bytes: {sum(len(r['text']) for r in rows)}",
            f"    num_examples: {n}",
        ]
    readme = "\n".join([*card, *infos, "---", "", "# Wikipedia (a local test copy)", ""])
    files["README.md"] = readme.encode("utf-8")
    return files


def hub_env(
    tmp_path: Path, hub: HubServer, base: Mapping[str, str] | None = None, **extra: str
) -> dict[str, str]:
    """A user's environment (``base``, default this process's) pointing the hub client at
    ``hub``: no proxy and no token, a fresh Hugging Face cache under ``tmp_path``, no
    telemetry, this checkout importable; ``extra`` on top."""
    env = {k: v for k, v in (base or os.environ).items() if not k.lower().endswith("_proxy")}
    env |= {
        "HF_ENDPOINT": hub.endpoint,
        "HF_HOME": str(tmp_path / "hf-home"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "PYTHONPATH": str(REPO),
        **extra,
    }
    env.pop("HF_TOKEN", None)
    return env


def frames_files(source: Path = FIXTURES / "eval_frames.csv") -> dict[str, bytes]:
    """A ``google/frames-benchmark``: the fixture's questions as ``test.tsv`` in the hub's layout
    (an unnamed index column first, tab-separated)."""
    with source.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t", lineterminator="\n")
    writer.writerow(["", *rows[0][1:]])
    writer.writerows(rows[1:])
    readme = "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n"
    readme += "    path: test.tsv\n---\n"
    return {"README.md": readme.encode(), "test.tsv": out.getvalue().encode("utf-8")}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--articles", type=int, default=3000, help="articles of 20231101.xx")
    parser.add_argument("--lifetime", type=float, default=3600.0, help="seconds before it stops")
    parser.add_argument(
        "--questions",
        type=Path,
        default=FIXTURES / "eval_frames.csv",
        help="a FRAMES questions CSV served as the hub's test.tsv (default: the test fixture's; "
        "a local copy's frames/frames_test_set.csv acts out a user's first run)",
    )
    args = parser.parse_args()
    with HubServer(lifetime=args.lifetime) as hub:
        hub.commit(WIKIPEDIA, wikipedia_files({"20231101.xx": args.articles}), "initial")
        hub.commit(FRAMES, frames_files(args.questions), "initial")
        print(f"HF_ENDPOINT={hub.endpoint} (CDN {hub.cdn})", flush=True)
        try:
            while not hub._over:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
    print(f"{len(hub.counts.requests)} requests", flush=True)
