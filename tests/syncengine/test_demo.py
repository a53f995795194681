"""The README's first command runs the demo; it must keep working."""

from __future__ import annotations

from syncengine import demo


def test_demo_seals_and_opens_every_message(capsys):
    assert demo.main() == 0
    out = capsys.readouterr().out
    assert out.count("opened: importable") == 4
    assert "cipher=age-v1 key_id=epoch-1" in out
    assert out.rstrip().endswith("ok")
