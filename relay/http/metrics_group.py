"""One ``/metrics`` answer for a whole ``relay serve --workers N`` group (#35).

The workers share one listening socket, so a scraper reaching the address
lands on whichever worker accepts: per-process figures would be a random
worker's, and N processes could not be scraped as N targets at one
address. So every worker answers for the group:

- each worker keeps publishing its *own* per-process samples (requests,
  latency, connection and live-wait figures, its pool) to
  ``<directory>/worker-<pid>.json``, written whole and renamed into place,
  at most :data:`PUBLISH_INTERVAL_SECONDS` apart and at every scrape it
  answers;
- the worker that answers a scrape collects its own samples fresh, reads
  its siblings' files and adds the samples up by name and labels (counters,
  histogram buckets, sums and counts, and gauges of things open now);
  ``*_created`` samples take the earliest value;
- when a worker exits, the supervisor renames its file ``retired-<pid>.json``:
  its counters stay in the totals (requests it served did happen), its
  gauges leave them (it holds nothing open any more).

A sibling's figures are therefore at most about a second old; the
database-wide gauges (teams, messages) are not per process and are read
once by the answering worker, never added up (relay/http/metrics.py).

The directory is private to the group (0700, made and removed by the
supervisor, relay/workers.py) and holds only metric names, closed label
values and numbers — nothing a scrape would not show anyway.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.core import Metric

__all__ = ["PUBLISH_INTERVAL_SECONDS", "MetricsGroup", "merge_families", "retire"]

#: How often an idle worker refreshes its published samples.
PUBLISH_INTERVAL_SECONDS = 1.0
_LIVE_PREFIX = "worker-"
_RETIRED_PREFIX = "retired-"
_SUFFIX = ".json"


def _file(directory: Path, prefix: str, pid: int) -> Path:
    return directory / f"{prefix}{pid}{_SUFFIX}"


def retire(directory: Path, pid: int) -> None:
    """A worker exited: keep its counters in the totals, drop its gauges."""
    # Missing: it never published (it died before its first tick).
    with contextlib.suppress(FileNotFoundError):
        os.replace(_file(directory, _LIVE_PREFIX, pid), _file(directory, _RETIRED_PREFIX, pid))


def _encode(families: Iterable[Metric]) -> list[dict[str, Any]]:
    return [
        {
            "name": family.name,
            "type": family.type,
            "documentation": family.documentation,
            "samples": [[s.name, s.labels, s.value] for s in family.samples],
        }
        for family in families
    ]


@dataclass(frozen=True, slots=True)
class _Published:
    families: list[dict[str, Any]]
    #: ``False`` for a worker that has exited (its gauges no longer count).
    live: bool


class MetricsGroup:
    """This worker's side of the group's shared metrics directory."""

    def __init__(self, directory: Path, pid: int | None = None) -> None:
        self.directory = directory
        self.pid = os.getpid() if pid is None else pid
        self._source: Callable[[], object] | None = None

    def attach(self, source: Callable[[], object]) -> None:
        """The app's metrics register how to publish their current figures."""
        self._source = source

    def refresh(self) -> None:
        """Publish the current figures now (the server calls it on its loop,
        about every :data:`PUBLISH_INTERVAL_SECONDS`); a no-op with metrics off."""
        if self._source is None:
            return
        # The directory going away with the group: siblings keep older figures.
        with contextlib.suppress(OSError):
            self._source()

    def publish(self, families: Iterable[Metric]) -> None:
        """Replace this worker's published samples (whole file, atomic rename)."""
        target = _file(self.directory, _LIVE_PREFIX, self.pid)
        scratch = target.with_name(f".{target.name}.tmp")
        scratch.write_text(json.dumps(_encode(families)), encoding="utf-8")
        os.replace(scratch, target)

    def siblings(self) -> Iterator[_Published]:
        """Every other worker's last published samples, live or retired."""
        own = _file(self.directory, _LIVE_PREFIX, self.pid).name
        for path in sorted(self.directory.glob(f"*{_SUFFIX}")):
            if path.name == own or path.name.startswith("."):
                continue
            live = path.name.startswith(_LIVE_PREFIX)
            if not live and not path.name.startswith(_RETIRED_PREFIX):
                continue
            try:
                families = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # retired or replaced between listing and reading
            if isinstance(families, list):
                yield _Published(families, live)


def merge_families(own: list[Metric], others: Iterable[_Published]) -> list[Metric]:
    """``own`` with every sibling's samples added in, family by family."""
    order: list[str] = []
    meta: dict[str, tuple[str, str]] = {}
    #: family -> (sample name, labels in any order) -> (labels as first seen, value)
    values: dict[str, dict[tuple[str, frozenset[tuple[str, str]]], tuple[dict[str, str], float]]]
    values = {}

    def add(name: str, typ: str, documentation: str, samples: Iterable[Any]) -> None:
        if name not in meta:
            order.append(name)
            meta[name] = (typ, documentation)
            values[name] = {}
        table = values[name]
        for sample_name, labels, value in samples:
            shown = {str(k): str(v) for k, v in labels.items()}
            key = (str(sample_name), frozenset(shown.items()))
            number = float(value)
            if key not in table:
                table[key] = (shown, number)
            elif key[0].endswith("_created"):
                table[key] = (table[key][0], min(table[key][1], number))
            else:
                table[key] = (table[key][0], table[key][1] + number)

    for metric in own:
        add(metric.name, metric.type, metric.documentation, _triples(metric))
    for published in others:
        for family in published.families:
            if not published.live and family.get("type") == "gauge":
                continue
            add(family["name"], family["type"], family["documentation"], family["samples"])
    merged: list[Metric] = []
    for name in order:
        typ, documentation = meta[name]
        metric = Metric(name, documentation, typ)
        for (sample_name, _), (labels, value) in values[name].items():
            metric.add_sample(sample_name, labels, value)
        merged.append(metric)
    return merged


def _triples(family: Metric) -> Iterator[tuple[str, dict[str, str], float]]:
    for sample in family.samples:
        yield sample.name, sample.labels, sample.value
