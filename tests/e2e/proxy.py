"""A loopback HTTP/1.1 fault proxy between the engine and a real relay.

It understands exactly as much HTTP as the faults need: each request and
each response is read whole (headers, then a ``Content-Length`` body or a
chunked one) and forwarded on a per-client upstream connection, so
keep-alive works as it does against the relay itself. A :class:`Fault`
names a request (``METHOD /path``, query ignored) and what happens to the
n-th match:

* ``drop_response`` — the request reaches the relay, the relay commits and
  answers, and the proxy closes the client's connection before a byte of
  that answer is sent (the "relay died after commit" case);
* ``answer`` — the proxy answers by itself (429/503 with ``Retry-After``,
  the protocol header and a proper v1 error envelope); the relay never
  sees the request;
* ``delay`` — the relay's answer is held back ``delay`` seconds;
* ``rewrite`` — the relay's genuine answer is parsed (:class:`Response`) and
  ``rewrite`` returns the bytes sent instead (a lying relay);
* ``raw`` — the request reaches the relay and ``raw`` writes whatever it
  likes to the client's socket (slow drips, truncations, garbage), after
  which the connection is closed;
* ``forge`` — the relay never sees the request: ``forge`` gets the client's
  socket and the request's bytes and answers as it likes (an answer made up
  at once, one held open silently, a drip), after which the connection is
  closed.

A fault fires on the ``nth`` match, or on every match when ``every``.

Every request seen is logged with its monotonic arrival time, so tests can
bound the waits between attempts from below.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from wire.http_v1.errors import ErrorResponse

_MAX_HEAD = 64 * 1024


@dataclass
class Fault:
    """What to do with the ``nth`` (1-based) request matching ``target``."""

    target: str  # "POST /v1/messages"
    action: str  # "drop_response" | "answer" | "delay" | "rewrite" | "raw"
    nth: int = 1
    status: int = 0
    retry_after: str | None = None
    body: bytes = b""
    fired_at: float | None = None
    every: bool = False
    delay: float = 0.0
    rewrite: Callable[[Response], bytes] | None = None
    raw: Callable[[socket.socket, Response], None] | None = None
    forge: Callable[[socket.socket, bytes], None] | None = None
    fired: int = 0


@dataclass
class Response:
    """A relay answer taken apart: status line, headers (in order), body."""

    status_line: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes
    request: bytes = b""

    @property
    def status(self) -> int:
        return int(self.status_line.split(b" ", 2)[1])

    def header(self, name: bytes) -> bytes | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    def json(self) -> Any:
        return json.loads(self.body)

    def encode(
        self,
        body: bytes | None = None,
        *,
        status_line: bytes | None = None,
        replace: dict[bytes, bytes] | None = None,
        drop: tuple[bytes, ...] = (),
    ) -> bytes:
        """These headers (minus ``drop``, with ``replace`` values) and ``body``,
        framed with a correct Content-Length."""
        body = self.body if body is None else body
        replace = {k.lower(): v for k, v in (replace or {}).items()}
        skip = {b"content-length", b"transfer-encoding", *(d.lower() for d in drop)}
        lines = [status_line or self.status_line]
        for name, value in self.headers:
            if name.lower() in skip or name.lower() in replace:
                continue
            lines.append(name + b": " + value)
        lines += [name + b": " + value for name, value in replace.items()]
        lines.append(b"content-length: %d" % len(body))
        return b"\r\n".join(lines) + b"\r\n\r\n" + body

    def with_json(self, document: Any) -> bytes:
        return self.encode(json.dumps(document, separators=(",", ":")).encode())


@dataclass
class Seen:
    target: str
    at: float
    fault: str | None


@dataclass
class FaultProxy:
    upstream_port: int
    faults: list[Fault] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    port: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _counts: dict[str, int] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self, target: str) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.target == target]

    def _decide(self, target: str) -> Fault | None:
        with self._lock:
            self._counts[target] = n = self._counts.get(target, 0) + 1
            due = (
                f
                for f in self.faults
                if f.target == target and (f.every or (f.nth == n and f.fired_at is None))
            )
            chosen = next(due, None)
            now = time.monotonic()
            if chosen is not None:
                chosen.fired_at = now
                chosen.fired += 1
            self.seen.append(Seen(target, now, chosen.action if chosen else None))
            return chosen

    def _serve_client(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            reader = client.makefile("rb")
            while True:
                request = _read_message(reader, is_request=True)
                if request is None:
                    return
                fault = self._decide(_target(request))
                if fault is not None and fault.action == "answer":
                    client.sendall(_synthetic(fault))
                    continue
                if fault is not None and fault.action == "forge":
                    assert fault.forge is not None
                    fault.forge(client, request)
                    return
                if upstream is None:
                    upstream = socket.create_connection(("127.0.0.1", self.upstream_port), 30)
                    upstream_reader = upstream.makefile("rb")
                upstream.sendall(request)
                response = _read_message(upstream_reader, is_request=False)
                if response is None:
                    return
                if fault is None:
                    client.sendall(response)
                elif fault.action == "drop_response":
                    return  # the relay committed; its answer is lost with the connection
                elif fault.action == "delay":
                    time.sleep(fault.delay)
                    client.sendall(response)
                elif fault.action == "rewrite":
                    assert fault.rewrite is not None
                    client.sendall(fault.rewrite(parse_response(response, request)))
                elif fault.action == "raw":
                    assert fault.raw is not None
                    fault.raw(client, parse_response(response, request))
                    return
        except OSError:
            return
        finally:
            if upstream is not None:
                upstream.close()
            client.close()


def _target(request: bytes) -> str:
    line = request.split(b"\r\n", 1)[0].decode("latin-1")
    method, path, _ = line.split(" ", 2)
    return f"{method} {path.split('?', 1)[0]}"


def _read_message(reader: BinaryIO, *, is_request: bool) -> bytes | None:
    """One whole HTTP/1.1 message as raw bytes, or ``None`` at a clean EOF."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = reader.readline(_MAX_HEAD)
        if not line:
            return None
        head += line
        if len(head) > _MAX_HEAD:
            raise OSError("header block too large")
    headers = {}
    for raw in head.split(b"\r\n")[1:]:
        if b":" in raw:
            name, value = raw.split(b":", 1)
            headers[name.strip().lower()] = value.strip()
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        body = b""
        while True:
            size_line = reader.readline(_MAX_HEAD)
            body += size_line
            size = int(size_line.split(b";", 1)[0], 16)
            chunk = reader.read(size + 2)
            body += chunk
            if size == 0:
                return head + body
    length = int(headers.get(b"content-length", b"0"))
    if not is_request and length == 0 and b"content-length" not in headers:
        return head  # no body (e.g. 204); the relay always declares its bodies
    return head + reader.read(length)


def parse_response(raw: bytes, request: bytes = b"") -> Response:
    head, _, rest = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers.append((name.strip(), value.strip()))
    response = Response(lines[0], headers, rest, request)
    if (response.header(b"transfer-encoding") or b"").lower() == b"chunked":
        body, data = b"", rest
        while True:
            size_line, _, data = data.partition(b"\r\n")
            size = int(size_line.split(b";", 1)[0], 16)
            if size == 0:
                break
            body, data = body + data[:size], data[size + 2 :]
        response.body = body
    return response


def _synthetic(fault: Fault) -> bytes:
    reason = {429: "Too Many Requests", 503: "Service Unavailable"}.get(fault.status, "Error")
    lines = [
        f"HTTP/1.1 {fault.status} {reason}",
        "Content-Type: application/json",
        f"Content-Length: {len(fault.body)}",
        "Agmsg-Protocol-Version: 1",
    ]
    if fault.retry_after is not None:
        lines.append(f"Retry-After: {fault.retry_after}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + fault.body


def error_body(
    status: int, code: str, *, server_instance_id: str | None, team_id: str | None
) -> bytes:
    """A v1 error envelope, validated by the codec's own schema."""
    document = ErrorResponse(
        status=status,
        code=code,
        message=f"injected {code} by the test proxy",
        server_instance_id=server_instance_id,
        team_id=team_id,
    ).to_obj()
    return json.dumps(document).encode()


@contextmanager
def fault_proxy(upstream_port: int, *faults: Fault) -> Iterator[FaultProxy]:
    """Run a proxy on 127.0.0.1 (a free port) in daemon threads until exit."""
    proxy = FaultProxy(upstream_port, list(faults))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    proxy.port = listener.getsockname()[1]
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=proxy._serve_client, args=(client,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
