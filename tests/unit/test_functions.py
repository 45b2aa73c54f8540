"""The Functions library's text (``rfetch/store/functions.py``) and when a script falls back
to EVALSHA, with a stand-in client (no Redis)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, cast

import pytest
from redis import Redis
from redis.commands.core import Script
from redis.exceptions import NoPermissionError, OutOfMemoryError, ResponseError

from rfetch.store.functions import Library, LuaScript, library_source
from rfetch.store.scripts import Scripts, script_library

LIBS = {"a": "local function a() return 1 end\n", "b": "-- #include a\nlocal B = {}\n"}


def test_every_script_is_one_function_of_one_library_with_each_shared_library_once() -> None:
    name, source = script_library(Scripts.names())
    assert re.fullmatch(r"rfetch_[0-9a-f]{12}", name)
    assert source.startswith(f"#!lua name={name}\n")
    registered = re.findall(r"^redis\.register_function\('(\w+)'", source, re.MULTILINE)
    assert registered == [f"{name}_{script}" for script in Scripts.names()]
    assert not re.search(r"^-- #include", source, re.MULTILINE)
    for lib in ("guard", "keys", "gate", "cap", "record", "outcome", "batch", "workflow"):
        assert source.count(f"-- lib/{lib}.lua:") == 1, lib


def test_the_library_name_changes_with_any_text_so_versions_do_not_clash() -> None:
    scripts = [("one", "-- #include b\nreturn 1\n"), ("two", "-- #include a\nreturn 2\n")]
    name, source = library_source(scripts, LIBS.__getitem__)
    assert source.count("local function a()") == 1
    assert source.index("local function a()") < source.index("local B = {}")
    assert library_source(scripts, LIBS.__getitem__)[0] == name
    changed = [scripts[0], ("two", "-- #include a\nreturn 3\n")]
    assert library_source(changed, LIBS.__getitem__)[0] != name
    other_lib = {**LIBS, "a": "local function a() return 2 end\n"}
    assert library_source(scripts, other_lib.__getitem__)[0] != name


class FakeRedis:
    """Answers FCALL from a script of replies (an exception is raised), records loads."""

    def __init__(self, *replies: object) -> None:
        self.replies = list(replies)
        self.loads = 0
        self.load_error: Exception | None = None

    def fcall(self, function: str, numkeys: int, *keys_and_args: Any) -> object:
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    def function_load(self, code: str, replace: bool = False) -> str:
        assert replace
        self.loads += 1
        if self.load_error is not None:
            raise self.load_error
        return "rfetch_x"


class FakeScript:
    """The EVALSHA fallback: counts its calls."""

    def __init__(self, client: FakeRedis) -> None:
        self.registered_client = client
        self.script = "return 'eval'"
        self.calls: list[Sequence[Any]] = []

    def __call__(self, keys: Sequence[str] = (), args: Sequence[Any] = (),
                 client: object = None) -> object:
        self.calls.append(keys)
        return "eval"


def script_on(client: FakeRedis) -> tuple[LuaScript, FakeScript]:
    fallback = FakeScript(client)
    return LuaScript("fetch", Library("rfetch_x", "src"), cast(Script, fallback)), fallback


def test_fcall_is_used_and_a_missing_library_is_loaded_then_called_again() -> None:
    client = FakeRedis("one", ResponseError("Function not found"), "two")
    script, fallback = script_on(client)
    assert script(["k"], [1]) == "one"
    assert script(["k"], [1]) == "two"
    assert client.loads == 1 and fallback.calls == []
    assert script.function == "rfetch_x_fetch"


@pytest.mark.parametrize("error", [
    ResponseError("unknown command 'FCALL', with args beginning with: "),
    NoPermissionError("this user has no permissions to run the 'fcall' command"),
])
def test_a_server_without_functions_falls_back_to_evalsha_for_good(error: Exception) -> None:
    client = FakeRedis(error)
    script, fallback = script_on(client)
    assert script(["k"]) == "eval"
    assert script(["k"]) == "eval"
    assert not script.library.usable and len(fallback.calls) == 2


def test_a_refused_load_falls_back_and_a_broken_library_is_an_error() -> None:
    client = FakeRedis(ResponseError("Function not found"))
    client.load_error = NoPermissionError("no permissions to run the 'function|load' command")
    script, _ = script_on(client)
    assert script(["k"]) == "eval" and not script.library.usable
    broken = FakeRedis(ResponseError("Function not found"))
    broken.load_error = ResponseError("Error registering functions: user_function:1: ...")
    with pytest.raises(ResponseError, match="Error registering functions"):
        script_on(broken)[0](["k"])


def test_oom_runs_that_call_by_evalsha_and_a_script_error_is_raised() -> None:
    client = FakeRedis(OutOfMemoryError("command not allowed"), "fcall",
                       ResponseError("WRONGTYPE queue:x is a string"))
    script, fallback = script_on(client)
    assert script(["k"]) == "eval"
    assert script(["k"]) == "fcall" and script.library.usable
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        script(["k"])
    assert len(fallback.calls) == 1


def test_a_pipeline_queues_the_evalsha() -> None:
    client = FakeRedis()
    script, fallback = script_on(client)
    pipe = Redis().pipeline()  # no connection is made until execute
    assert script(["k"], client=pipe) == "eval"
    assert len(fallback.calls) == 1
