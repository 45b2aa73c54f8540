"""The key names Lua derives (``rfetch/lua/lib/keys.lua``'s ``KEY_FORMATS``) are exactly those
of :class:`rfetch.store.keys.Keys`: the Lua table is read as text and each format, filled
with sample names under a few namespaces, is compared with what ``Keys`` returns. No Redis."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from rfetch.store.keys import Keys

_ENTRY = re.compile(r"^\s+(\w+) = '([^']*)',$", re.MULTILINE)
SAMPLES = ("q1", "k:2", "d|3")


def key_formats() -> dict[str, str]:
    """``KEY_FORMATS`` of lib/keys.lua: name -> format."""
    text = resources.files("rfetch").joinpath("lua/lib/keys.lua").read_text("utf-8")
    block = text[text.index("local KEY_FORMATS = {") : text.index("\n}\n")]
    return dict(_ENTRY.findall(block))


def test_the_table_is_read() -> None:
    formats = key_formats()
    assert len(formats) >= 20
    assert formats["queue"] == "queue:%s"


@pytest.mark.parametrize("namespace", [None, "ns", "{tag}"])
@pytest.mark.parametrize("name", sorted(key_formats()))
def test_each_lua_format_is_the_keys_name(namespace: str | None, name: str) -> None:
    keys = Keys(namespace)
    fmt = key_formats()[name]
    args = SAMPLES[: fmt.count("%s")]
    attr = getattr(keys, name)
    expected = attr(*args) if callable(attr) else attr
    assert keys.prefix + fmt % args == expected
