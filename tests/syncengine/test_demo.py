"""The README's first command runs the demo; it must keep working."""

from __future__ import annotations

from syncengine import demo


def test_demo_seals_and_opens_every_message(capsys):
    assert demo.main() == 0
    out = capsys.readouterr().out
    assert out.count("opened: importable") == 2
    assert out.rstrip().endswith("ok")
