"""What a missing optional part of the relay tells a user to install
(relay/extras.py; issue #33 item 6: a wheel is a first-class install)."""

from __future__ import annotations

import sys

from relay.extras import install_hint


def test_the_hint_names_this_interpreter_and_the_extras_own_packages() -> None:
    hint = install_hint("relay")
    assert sys.executable in hint and "-m pip install" in hint
    assert "starlette" in hint and "uvicorn" in hint


def test_the_hint_never_sends_a_user_to_a_checkout_or_the_index_name() -> None:
    for extra in ("relay", "postgres"):
        hint = install_hint(extra)
        assert "checkout" not in hint and "-e" not in hint.split()
        assert "syncengine[" not in hint  # the index's 'syncengine' is someone else's


def test_an_unknown_extra_gets_words_not_a_wrong_command() -> None:
    assert "pip" not in install_hint("no-such-extra")
