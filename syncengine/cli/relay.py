"""CLI composition root: the ``relay`` command group lives in :mod:`relay.cli`."""

from relay.cli import register as register
