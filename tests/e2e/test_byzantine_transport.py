"""A relay lying at the HTTP and transport level (issue #14, item 4).

The other byzantine tests lie in well-formed documents; these lie below
them, in the framing: truncated and dripping answers, compression bombs,
absurd or endless lengths, redirects, absurd headers, bodies that are not
the JSON they claim to be, and connections that die mid-answer or before
it. Each test arms one lie through the fault proxy (tests/e2e/proxy.py),
lets the victim machine operate through it (tests/e2e/byzantine.py), and
proves what the client does about it:

* the operation ends, within a bound that follows from the victim's own
  configuration (a 3 s whole-attempt deadline, two attempts), never a hang;
* it ends with the one typed error the lie deserves
  (:mod:`syncengine.http.errors`) — never a traceback, a ``RecursionError``,
  or an untyped exception — and ``status`` records exactly that outcome;
* nothing is lost, skipped, invented or duplicated, and the transport
  cursor never moves on a lie (:meth:`Scene.check`), and once the lie ends
  one honest sync converges to the relay's history, each message once
  (:meth:`Scene.heal`);
* memory stays bounded: the peak RSS of a ``syncengine pull`` process fed a
  256 MiB gzip bomb, or an endless undeclared body, is measured.

The bomb is deflated once from zeros in 1 MiB blocks (about 260 KB on the
wire); endless bodies are generated block by block and stop as soon as the
client hangs up, so the tests stay light however much they threaten.
"""

from __future__ import annotations

import functools
import os
import re
import socket
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from syncengine.engine.limits import PULL_PAGE_LIMIT
from syncengine.http import errors as e
from syncengine.http.client import page_response_bound
from syncengine.http.retry import MAX_RETRY_AFTER
from tests.e2e.byzantine import PAGES, POST, VICTIM_CONFIG, Attack, Scene, byzantine_scene
from tests.e2e.proxy import Fault, Response, error_body
from tests.support.live_relay import LiveRelay
from tests.support.machines import Machine

_MiB = 1024 * 1024
_KiB = 1024

DEADLINE = VICTIM_CONFIG.request_deadline
ATTEMPTS = VICTIM_CONFIG.retry.max_attempts
#: An operation refused on sight: well inside one attempt's deadline, so a
#: test passing this bound proves no attempt waited its deadline out.
QUICK = DEADLINE * 0.8
#: The bytes the victim reads for one message page (its default page limit).
PAGE_BOUND = page_response_bound(PULL_PAGE_LIMIT, VICTIM_CONFIG)
#: Peak RSS a ``syncengine pull`` process may reach when refusing a bomb.
BOMB_RSS_LIMIT = 150 * _MiB
BOMB_INFLATED = 256 * _MiB


# -- lies -----------------------------------------------------------------------------


def head(
    response: Response,
    *,
    status_line: bytes | None = None,
    replace: dict[bytes, bytes] | None = None,
    drop: tuple[bytes, ...] = (),
) -> bytes:
    """The genuine status line and headers, without any framing header
    (Content-Length, Transfer-Encoding) unless ``replace`` adds one."""
    replace = {k.lower(): v for k, v in (replace or {}).items()}
    skip = {b"content-length", b"transfer-encoding", *(d.lower() for d in drop), *replace}
    lines = [status_line or response.status_line]
    lines += [k + b": " + v for k, v in response.headers if k.lower() not in skip]
    lines += [k + b": " + v for k, v in replace.items()]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def send(client: socket.socket, data: bytes) -> bool:
    """Write ``data``; ``False`` once the victim has hung up."""
    try:
        client.sendall(data)
    except OSError:
        return False
    return True


def raw(target: str, write: Callable[[socket.socket, Response], None]) -> Fault:
    return Fault(target, "raw", every=True, raw=write)


def rewrite(target: str, change: Callable[[Response], bytes]) -> Fault:
    return Fault(target, "rewrite", every=True, rewrite=change)


def drip(client: socket.socket, data: bytes, *, pause: float = 0.1, limit: float = 15.0) -> None:
    """``data`` one byte every ``pause`` seconds (for ``limit`` seconds at most)."""
    stop = time.monotonic() + limit
    for index in range(len(data)):
        if time.monotonic() > stop or not send(client, data[index : index + 1]):
            return
        time.sleep(pause)


def reset(client: socket.socket) -> None:
    """Make the coming close a TCP reset rather than an orderly FIN."""
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


@dataclass
class Stream:
    """An endless body, generated block by block; counts what got out."""

    cap: int
    sent: int = 0

    def blocks(self, block: bytes) -> Iterator[bytes]:
        while self.sent < self.cap:
            yield block
            self.sent += len(block)


@functools.cache
def gzip_bomb() -> bytes:
    """A single gzip member that inflates to :data:`BOMB_INFLATED` zero bytes,
    deflated block by block (the 256 MiB are never held)."""
    deflate = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(_MiB)
    parts = [deflate.compress(block) for _ in range(BOMB_INFLATED // _MiB)]
    parts.append(deflate.flush())
    return b"".join(parts)


def inflated_size(data: bytes) -> int:
    """What ``data`` inflates to, inflated in bounded steps."""
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    total, pending = 0, data
    while pending:
        total += len(inflate.decompress(pending, _MiB))
        pending = inflate.unconsumed_tail
    return total + len(inflate.flush())


def chunked(blocks: Iterator[bytes]) -> Iterator[bytes]:
    for block in blocks:
        yield b"%x\r\n%s\r\n" % (len(block), block)
    yield b"0\r\n\r\n"


def bomb_fault(framing: str = "content-length") -> Fault:
    bomb = gzip_bomb()

    def write(client: socket.socket, response: Response) -> None:
        framed = {b"content-encoding": b"gzip"}
        if framing == "chunked":
            framed[b"transfer-encoding"] = b"chunked"
            parts = chunked(iter([bomb[i : i + 64 * _KiB] for i in range(0, len(bomb), 64 * _KiB)]))
        else:
            framed[b"content-length"] = b"%d" % len(bomb)
            parts = iter([bomb])
        if send(client, head(response, replace=framed)):
            for part in parts:
                if not send(client, part):
                    return

    return raw(PAGES, write)


def endless_fault(stream: Stream, framing: str) -> Fault:
    """A 200 page whose body never declares its length and never ends
    (until ``stream.cap``): chunked, or delimited by the close."""
    block = b" " * _MiB  # JSON whitespace: nothing but the length is wrong

    def write(client: socket.socket, response: Response) -> None:
        if framing == "chunked":
            framed, parts = {b"transfer-encoding": b"chunked"}, chunked(stream.blocks(block))
        else:
            framed, parts = {b"connection": b"close"}, stream.blocks(block)
        if send(client, head(response, replace=framed)):
            for part in parts:
                if not send(client, part):
                    return

    return raw(PAGES, write)


# -- what the victim did ------------------------------------------------------------


def refused(
    attack: Attack, kind: type[e.RelayClientError], *, attempts: int = 1
) -> e.RelayClientError:
    """``attack`` ended quickly with exactly ``kind`` after ``attempts`` attempts."""
    error = attack.error
    assert isinstance(error, kind), f"expected {kind.__name__}, got {error!r}"
    assert error.attempts == attempts, error.attempts
    assert attack.seconds < QUICK, f"{attack.seconds:.2f} s for a refusal on sight"
    return error


def untouched(scene: Scene) -> None:
    """The lie came on the first page: nothing applied, the cursor unmoved."""
    assert scene.cursor() == 0
    assert scene.bodies() == []


def recorded(scene: Scene, kind: type[BaseException]) -> None:
    """``status`` names the class of the failure, not just its state."""
    with scene.engine() as engine:
        assert engine.status().engine.last_error_class == kind.__name__


def finish(scene: Scene) -> None:
    scene.check()
    scene.heal()


@contextmanager
def listener() -> Iterator[socket.socket]:
    """A second loopback listener, for redirects to point at."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        sock.setblocking(False)
        yield sock
    finally:
        sock.close()


def connected(sock: socket.socket) -> bool:
    """Whether anything connected to ``sock`` (the kernel completes the
    handshake into the backlog whether or not we accept)."""
    try:
        peer, _ = sock.accept()
    except BlockingIOError:
        return False
    peer.close()
    return True


#: ``syncengine pull`` reporting its own peak RSS. ``VmHWM`` rather than
#: ``ru_maxrss``: Linux carries ``ru_maxrss`` across ``execve``, so a child of
#: a big pytest process would report the parent's peak, not its own.
MEASURED_PULL = """\
import re, resource, sys
from syncengine.cli import main
code = main(sys.argv[1:])
try:
    with open("/proc/self/status") as status:
        peak = int(re.search(r"^VmHWM:\\s+(\\d+) kB", status.read(), re.M).group(1))
except OSError:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print("peak-rss-kib", peak, file=sys.stderr)
sys.exit(code)
"""


def measured_pull(machine: Machine, *args: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """``syncengine pull ARGS`` as its own process; returns it and its peak RSS in bytes."""
    env = {k: v for k, v in os.environ.items() if k != "SYNCENGINE_CRASH_AT"}
    result = subprocess.run(
        [sys.executable, "-c", MEASURED_PULL, "pull", "--json", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "SYNCENGINE_STORE": str(machine.store)},
        check=False,
    )
    found = re.findall(r"^peak-rss-kib (\d+)$", result.stderr, re.MULTILINE)
    assert found, result.stderr
    return result, int(found[-1]) * _KiB


# -- 1. truncation --------------------------------------------------------------------


@pytest.mark.parametrize("cut", ["half-the-body", "all-of-it-but-promised-more"])
def test_a_page_ending_before_its_declared_length_is_a_transport_failure_and_nothing_moves(
    live: LiveRelay, tmp_path: Path, cut: str
) -> None:
    def write(client: socket.socket, response: Response) -> None:
        body = response.body
        if cut == "half-the-body":
            promised, sent = len(body), body[: len(body) // 2]
        else:
            promised, sent = len(body) + 4096, body
        send(client, head(response, replace={b"content-length": b"%d" % promised}) + sent)

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(raw(PAGES, write))
        attack = scene.attack("pull")
        refused(attack, e.TransportFailure, attempts=ATTEMPTS)
        assert len(scene.proxy.requests(PAGES)) == ATTEMPTS
        untouched(scene)
        recorded(scene, e.TransportFailure)
        finish(scene)


# -- 2. slow drips ----------------------------------------------------------------------


def assert_cut_at_the_deadline(attack: Attack) -> None:
    assert isinstance(attack.error, e.TransportFailure), repr(attack.error)
    assert attack.error.attempts == ATTEMPTS
    expected = DEADLINE * ATTEMPTS
    assert attack.seconds >= expected * 0.9, f"{attack.seconds:.2f} s: the drip was not waited"
    assert attack.seconds <= expected * 2, f"{attack.seconds:.2f} s for {expected:g} s of deadline"


def test_headers_dripped_a_byte_at_a_time_are_cut_at_the_whole_attempt_deadline(
    live: LiveRelay, tmp_path: Path
) -> None:
    def write(client: socket.socket, response: Response) -> None:
        padded = response.encode(replace={b"x-padding": b"p" * 400})  # ~80 s of drip
        drip(client, padded)

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(raw(PAGES, write))
        attack = scene.attack("pull")
        assert_cut_at_the_deadline(attack)
        untouched(scene)
        finish(scene)


def test_a_body_dripped_a_byte_at_a_time_is_cut_at_the_whole_attempt_deadline(
    live: LiveRelay, tmp_path: Path
) -> None:
    def write(client: socket.socket, response: Response) -> None:
        body = response.body + b" " * 400  # JSON whitespace: ~40 s more of drip
        if send(client, head(response, replace={b"content-length": b"%d" % len(body)})):
            drip(client, body)

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(raw(PAGES, write))
        attack = scene.attack("pull")
        assert_cut_at_the_deadline(attack)
        untouched(scene)
        finish(scene)


def test_an_endless_stream_of_informational_answers_is_cut_at_the_whole_attempt_deadline(
    live: LiveRelay, tmp_path: Path
) -> None:
    """httpcore skips any number of ``100 Continue`` before the real answer;
    only the whole-attempt deadline ends a relay that never stops sending them."""

    def write(client: socket.socket, response: Response) -> None:
        stop = time.monotonic() + 15
        while time.monotonic() < stop:
            if not send(client, b"HTTP/1.1 100 Continue\r\nx-wait: more\r\n\r\n" * 100):
                return
            time.sleep(0.01)

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(raw(PAGES, write))
        attack = scene.attack("pull")
        assert_cut_at_the_deadline(attack)
        untouched(scene)
        finish(scene)


# -- 3. compression bombs ---------------------------------------------------------------


def test_the_bomb_really_inflates_to_256_mib() -> None:
    bomb = gzip_bomb()
    assert len(bomb) < _MiB
    assert inflated_size(bomb) == BOMB_INFLATED


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_gzip_bomb_is_refused_unread_as_a_protocol_violation(
    live: LiveRelay, tmp_path: Path, framing: str
) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(bomb_fault(framing))
        attack = scene.attack("pull")
        refused(attack, e.ProtocolViolation)
        assert "compressed" in str(attack.error)
        untouched(scene)
        recorded(scene, e.ProtocolViolation)
        finish(scene)


def test_a_gzip_bomb_leaves_the_pull_process_far_below_its_inflated_size_in_memory(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(bomb_fault())
        result, peak = measured_pull(scene.victim)
        assert result.returncode == 4, result.stderr  # refused
        assert '"protocol-violation"' in result.stdout
        assert peak < BOMB_RSS_LIMIT, f"peak RSS {peak / _MiB:.0f} MiB"
        untouched(scene)
        assert scene.state() == "refused"
        finish(scene)


# -- 4. huge bodies ---------------------------------------------------------------------


def test_a_declared_ten_gib_body_is_refused_before_a_byte_of_it_is_read(
    live: LiveRelay, tmp_path: Path
) -> None:
    stream = Stream(cap=2 * PAGE_BOUND)

    def write(client: socket.socket, response: Response) -> None:
        if send(client, head(response, replace={b"content-length": b"%d" % (10 * 1024**3)})):
            for block in stream.blocks(b" " * (64 * _KiB)):
                if not send(client, block):
                    return

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(raw(PAGES, write))
        attack = scene.attack("pull")
        refused(attack, e.ResponseTooLarge)
        assert "declares" in str(attack.error)
        # The victim hung up on the headers: only what the sockets buffer got
        # out, far less than the page bound it would have read otherwise.
        assert stream.sent < PAGE_BOUND // 4, stream.sent
        untouched(scene)
        recorded(scene, e.ResponseTooLarge)
        finish(scene)


@pytest.mark.parametrize("framing", ["chunked", "close-delimited"])
def test_an_undeclared_body_streamed_past_the_page_bound_is_cut_at_the_bound(
    live: LiveRelay, tmp_path: Path, framing: str
) -> None:
    stream = Stream(cap=PAGE_BOUND + 64 * _MiB)
    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(endless_fault(stream, framing))
        attack = scene.attack("pull")
        refused(attack, e.ResponseTooLarge)
        assert "exceeds" in str(attack.error)
        # Cut at the bound: what got out is the bound plus what the sockets buffer.
        assert PAGE_BOUND < stream.sent < PAGE_BOUND + 32 * _MiB, stream.sent
        untouched(scene)
        recorded(scene, e.ResponseTooLarge)
        finish(scene)


def test_an_endless_undeclared_body_leaves_the_pull_process_memory_bounded_by_the_page(
    live: LiveRelay, tmp_path: Path
) -> None:
    stream = Stream(cap=PAGE_BOUND * 4)
    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(endless_fault(stream, "close-delimited"))
        result, peak = measured_pull(scene.victim)
        assert result.returncode == 4, result.stderr  # adjust: ask for a smaller page
        assert '"response-too-large"' in result.stdout
        assert stream.sent < stream.cap
        # One page buffer at most, plus the interpreter: never the stream.
        assert peak < PAGE_BOUND + 100 * _MiB, f"peak RSS {peak / _MiB:.0f} MiB"
        untouched(scene)
        assert scene.state() == "adjust"
        finish(scene)


# -- 5. redirects -------------------------------------------------------------------------


REDIRECTS = {
    301: b"Moved Permanently",
    302: b"Found",
    303: b"See Other",
    307: b"Temporary Redirect",
    308: b"Permanent Redirect",
}


def redirect_to(port: int, status: int) -> Callable[[Response], bytes]:
    def change(response: Response) -> bytes:
        location = b"http://127.0.0.1:%d/v1/messages?after=0&limit=1000" % port
        return response.encode(
            b"", status_line=b"HTTP/1.1 %d %s" % (status, REDIRECTS[status]),
            replace={b"location": location},
        )  # fmt: skip

    return change


@pytest.mark.parametrize("status", sorted(REDIRECTS))
def test_a_redirected_page_is_refused_and_its_target_never_contacted(
    live: LiveRelay, tmp_path: Path, status: int
) -> None:
    with listener() as elsewhere, byzantine_scene(live, tmp_path) as scene:
        scene.lie(rewrite(PAGES, redirect_to(elsewhere.getsockname()[1], status)))
        attack = scene.attack("pull")
        error = refused(attack, e.RedirectRefused)
        assert "/v1/messages" not in str(error)  # the origin only, never a path
        time.sleep(0.1)
        assert not connected(elsewhere), "the redirect target was contacted"
        untouched(scene)
        recorded(scene, e.RedirectRefused)
        finish(scene)


@pytest.mark.parametrize("status", [307, 308])
def test_a_redirected_batch_is_refused_never_resent_elsewhere_and_acked_once_after(
    live: LiveRelay, tmp_path: Path, status: int
) -> None:
    """307/308 would have the body (and the bearer) re-sent; the relay
    committed the batch, so healing must meet it as a duplicate."""
    with listener() as elsewhere, byzantine_scene(live, tmp_path, messages=2) as scene:
        scene.victim_sends("v1", "v2")
        scene.lie(rewrite(POST, redirect_to(elsewhere.getsockname()[1], status)))
        attack = scene.attack("push")
        refused(attack, e.RedirectRefused)
        time.sleep(0.1)
        assert not connected(elsewhere), "the redirect target was contacted"
        assert len(scene.proxy.requests(POST)) == 1
        recorded(scene, e.RedirectRefused)
        finish(scene)


# -- 6. absurd headers --------------------------------------------------------------------


RETRY_AFTERS = {
    "five-hundred-digits": ("9" * 500, MAX_RETRY_AFTER),
    "the-last-second-of-9999": ("Fri, 31 Dec 9999 23:59:59 GMT", MAX_RETRY_AFTER),
    "negative": ("-5", None),
    "nan": ("nan", None),
    "garbage": ("soon, I promise", None),
}


@pytest.mark.parametrize("name", list(RETRY_AFTERS))
@pytest.mark.parametrize(
    ("status", "code", "kind"),
    [(429, "rate-limited", e.RateLimited), (503, "unavailable", e.RelayUnavailable)],
)
def test_an_absurd_retry_after_is_clamped_or_ignored_and_never_parks_the_client(
    live: LiveRelay,
    tmp_path: Path,
    name: str,
    status: int,
    code: str,
    kind: type[e.RelayClientError],
) -> None:
    value, wait = RETRY_AFTERS[name]
    with byzantine_scene(live, tmp_path) as scene:
        body = error_body(
            status, code, server_instance_id=live.server_instance_id, team_id=scene.team.id
        )
        scene.lie(Fault(PAGES, "answer", every=True, status=status, retry_after=value, body=body))
        attack = scene.attack("pull")
        # A clamped wait (an hour) is more than the retry budget: it surfaces at
        # once for the run loop to honour. An unreadable one is ignored: backoff.
        attempts = 1 if wait is not None else ATTEMPTS
        error = refused(attack, kind, attempts=attempts)
        assert error.retry_after == wait
        assert len(scene.proxy.requests(PAGES)) == attempts
        untouched(scene)
        recorded(scene, kind)
        finish(scene)


@pytest.mark.parametrize("version", [None, b"2", b"01", b"1, 1"])
def test_a_page_without_exactly_protocol_version_1_is_a_protocol_violation(
    live: LiveRelay, tmp_path: Path, version: bytes | None
) -> None:
    def change(response: Response) -> bytes:
        header = b"agmsg-protocol-version"
        if version is None:
            return response.encode(drop=(header,))
        return response.encode(replace={header: version})

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(rewrite(PAGES, change))
        attack = scene.attack("pull")
        refused(attack, e.ProtocolViolation)
        untouched(scene)
        recorded(scene, e.ProtocolViolation)
        finish(scene)


def test_a_thousand_extra_headers_are_ignored_and_the_page_applies(
    live: LiveRelay, tmp_path: Path
) -> None:
    def change(response: Response) -> bytes:
        framed = response.encode()
        end = framed.index(b"\r\n\r\n")
        extra = b"".join(b"\r\nx-extra-%04d: value-%04d" % (i, i) for i in range(1000))
        return framed[:end] + extra + framed[end:]

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(rewrite(PAGES, change))
        attack = scene.attack("pull")
        assert attack.error is None, repr(attack.error)
        assert attack.seconds < QUICK
        assert sorted(scene.bodies()) == sorted(scene.sent)
        finish(scene)


@pytest.mark.parametrize(
    ("size", "kind"),
    [(64 * _KiB + 1, None), (1 * _MiB, e.TransportFailure)],
    ids=["just-over-64-kib", "one-mib"],
)
def test_a_single_huge_header_is_read_within_the_parser_bound_or_refused_beyond_it(
    live: LiveRelay, tmp_path: Path, size: int, kind: type[e.RelayClientError] | None
) -> None:
    """httpcore reads at most 100 KiB of header block; a header within it is
    harmless, one beyond is a broken answer — never a memory hog."""

    def change(response: Response) -> bytes:
        return response.encode(replace={b"x-huge": b"h" * size})

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(rewrite(PAGES, change))
        attack = scene.attack("pull")
        if kind is None:
            assert attack.error is None, repr(attack.error)
            assert attack.seconds < QUICK
            assert sorted(scene.bodies()) == sorted(scene.sent)
        else:
            refused(attack, kind, attempts=ATTEMPTS)
            untouched(scene)
        finish(scene)


def test_two_conflicting_content_lengths_are_a_transport_failure(
    live: LiveRelay, tmp_path: Path
) -> None:
    def change(response: Response) -> bytes:
        body = response.body
        framed = head(response, replace={b"content-length": b"%d" % len(body)})
        return framed[:-2] + b"content-length: %d\r\n\r\n" % (len(body) // 2) + body

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(rewrite(PAGES, change))
        attack = scene.attack("pull")
        refused(attack, e.TransportFailure, attempts=ATTEMPTS)
        untouched(scene)
        finish(scene)


# -- 7. garbage bodies on a 200 -----------------------------------------------------------


def _invalid_utf8(body: bytes) -> bytes:
    return body.replace(b'"messages"', b'"messages\xff\xfe"', 1)


def _nested(body: bytes) -> bytes:
    depth = 100_000
    return body[:-1] + b',"junk":' + b"[" * depth + b"]" * depth + b"}"


def _duplicate_key(body: bytes) -> bytes:
    return b'{"next_after":999999,' + body[1:]


def _huge_integer(body: bytes) -> bytes:
    return b'{"junk":' + b"9" * 100_000 + b"," + body[1:]


def _huge_float(body: bytes) -> bytes:
    return b'{"junk":1e999999,' + body[1:]


GARBAGE: dict[str, Callable[[bytes], bytes]] = {
    "not-json": lambda body: b"<html><body>It works!</body></html>",
    "invalid-utf8": _invalid_utf8,
    "nested-100000-deep": _nested,
    "duplicate-key": _duplicate_key,
    "huge-integer": _huge_integer,
    "huge-float": _huge_float,
    "trailing-data": lambda body: body + b"{}",
}


@pytest.mark.parametrize("name", list(GARBAGE))
def test_a_200_page_that_is_not_strict_json_is_a_typed_protocol_violation(
    live: LiveRelay, tmp_path: Path, name: str
) -> None:
    garble = GARBAGE[name]

    def change(response: Response) -> bytes:
        if response.status != 200:
            return response.encode()
        return response.encode(garble(response.body))

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(rewrite(PAGES, change))
        attack = scene.attack("pull")
        refused(attack, e.ProtocolViolation)
        assert "strict JSON" in str(attack.error)
        untouched(scene)
        recorded(scene, e.ProtocolViolation)
        finish(scene)


def test_a_page_of_millions_of_empty_arrays_is_refused_before_it_is_decoded(
    live: LiveRelay, tmp_path: Path
) -> None:
    """Valid strict JSON, well inside the page bound, in an unknown member the
    page schema ignores: each 3-byte ``[]`` becomes a 56-byte list (plus its
    slot), so the decoded document was ~25x the bytes the bound admitted; the
    structure count (wire.http_v1.body.check_structure) refuses it first."""
    size = 8 * _MiB

    def change(response: Response) -> bytes:
        if response.status != 200:
            return response.encode()
        junk = b'{"junk":[' + b"[]," * (size // 3) + b"[]],"
        return response.encode(junk + response.body[1:])

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(rewrite(PAGES, change))
        result, peak = measured_pull(scene.victim)
        assert result.returncode == 4, result.stderr
        assert "arrays, objects and separators" in result.stderr
        assert peak < BOMB_RSS_LIMIT, f"peak RSS {peak / _MiB:.0f} MiB for an {size >> 20} MiB page"
        scene.check()
        scene.heal()


# -- 8. connections that die ---------------------------------------------------------------


def test_a_connection_reset_mid_answer_is_a_transport_failure_and_nothing_moves(
    live: LiveRelay, tmp_path: Path
) -> None:
    def write(client: socket.socket, response: Response) -> None:
        framed = response.encode()
        send(client, framed[: len(framed) // 2])
        time.sleep(0.05)  # let the victim read into the body first
        reset(client)

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(raw(PAGES, write))
        attack = scene.attack("pull")
        refused(attack, e.TransportFailure, attempts=ATTEMPTS)
        untouched(scene)
        recorded(scene, e.TransportFailure)
        finish(scene)


def test_an_empty_answer_is_a_transport_failure_and_nothing_moves(
    live: LiveRelay, tmp_path: Path
) -> None:
    def write(client: socket.socket, response: Response) -> None:
        return  # the connection is closed right after the request

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(raw(PAGES, write))
        attack = scene.attack("pull")
        refused(attack, e.TransportFailure, attempts=ATTEMPTS)
        untouched(scene)
        recorded(scene, e.TransportFailure)
        finish(scene)


def test_an_answer_that_is_not_http_is_a_transport_failure(live: LiveRelay, tmp_path: Path) -> None:
    def write(client: socket.socket, response: Response) -> None:
        send(client, b"SSH-2.0-OpenSSH_9.6\r\n\x00\xff garbage \r\n\r\n")

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(raw(PAGES, write))
        attack = scene.attack("pull")
        refused(attack, e.TransportFailure, attempts=ATTEMPTS)
        untouched(scene)
        finish(scene)


def test_a_batch_whose_answer_is_reset_is_resent_identically_and_stored_once(
    live: LiveRelay, tmp_path: Path
) -> None:
    """The relay committed the batch; the reset hides it. The retry (and the
    healing sync) re-send the same bytes and meet duplicates, never copies."""

    def write(client: socket.socket, response: Response) -> None:
        framed = response.encode()
        send(client, framed[: len(framed) // 2])
        reset(client)

    with byzantine_scene(live, tmp_path, messages=2) as scene:
        scene.victim_sends("v1", "v2", "v3")
        scene.lie(raw(POST, write))
        attack = scene.attack("push")
        refused(attack, e.TransportFailure, attempts=ATTEMPTS)
        posts = scene.proxy.requests(POST)
        assert len(posts) == ATTEMPTS
        recorded(scene, e.TransportFailure)
        finish(scene)
