from __future__ import annotations

from pathlib import Path

from syncengine.store import default_store_path, resolve_store_path


def test_explicit_path_wins_over_environment() -> None:
    env = {"SYNCENGINE_STORE": "/env/store.db", "XDG_STATE_HOME": "/xdg"}
    assert resolve_store_path("/flag/store.db", env) == Path("/flag/store.db")


def test_environment_variable_wins_over_xdg_default() -> None:
    env = {"SYNCENGINE_STORE": "/env/store.db", "XDG_STATE_HOME": "/xdg"}
    assert resolve_store_path(None, env) == Path("/env/store.db")


def test_default_lives_under_xdg_state_home() -> None:
    assert default_store_path({"XDG_STATE_HOME": "/xdg"}) == Path("/xdg/syncengine/store.db")


def test_relative_or_missing_xdg_state_home_falls_back_to_local_state() -> None:
    expected = Path("/home/u/.local/state/syncengine/store.db")
    assert default_store_path({"HOME": "/home/u"}) == expected
    assert default_store_path({"HOME": "/home/u", "XDG_STATE_HOME": "rel"}) == expected
