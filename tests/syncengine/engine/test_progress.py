"""Progress on a terminal (issue #18, item 4): count, total, percentage,
rate and ETA while it runs; counts and elapsed time when it ends."""

from __future__ import annotations

import io

from syncengine.engine.progress import Progress, progress_for
from tests.syncengine.http.helpers import FakeTime


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_known_total_shows_the_share_the_rate_and_the_eta() -> None:
    time = FakeTime()
    progress = Progress("pull", Tty(), time.clock)
    progress.total = 10_000
    time.now += 2.0
    progress.add(2_500)
    assert progress.line() == "pull: 2,500 of 10,000 messages (25%), 1,250/s, ETA 6.0 s"


def test_without_a_total_only_the_count_and_rate_show() -> None:
    time = FakeTime()
    progress = Progress("push", Tty(), time.clock)
    time.now += 4.0
    progress.add(1_000)
    assert progress.line() == "push: 1,000 messages, 250/s"


def test_the_final_line_carries_the_elapsed_time_instead_of_an_eta() -> None:
    time = FakeTime()
    stream = Tty()
    progress = Progress("pull", stream, time.clock)
    progress.total = 300
    time.now += 90.0
    progress.add(300)
    progress.done()
    final = stream.getvalue().split("\r")[-1]
    assert final.startswith("pull: 300 of 300 messages (100%), 3/s, 1 min 30 s in all")
    assert final.endswith("\n")


def test_a_count_beyond_an_estimated_total_drops_the_total() -> None:
    time = FakeTime()
    progress = Progress("pull", Tty(), time.clock)
    progress.total = 10
    time.now += 1.0
    progress.add(12)
    assert progress.line() == "pull: 12 messages, 12/s"


def test_nothing_is_written_when_stderr_is_not_a_terminal() -> None:
    stream = io.StringIO()
    progress = progress_for(stream)("pull")
    progress.add(5)
    progress.done()
    assert stream.getvalue() == ""
