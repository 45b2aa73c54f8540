"""Retry arithmetic: Sidekiq's backoff, retry counts, error fields, the compressed backtrace."""

from __future__ import annotations

import json
import random
import shutil
import subprocess

import pytest

from rfetch.worker.retry import (
    backoff_seconds,
    compress_backtrace,
    decompress_backtrace,
    error_class_name,
    max_attempts,
)


class FixedRng(random.Random):
    """``randrange`` always gives ``value`` (Ruby's ``rand(10)`` stubbed)."""

    def __init__(self, value: int) -> None:
        super().__init__(0)
        self.value = value
        self.calls: list[int] = []

    def randrange(self, *args: int, **kwargs: int) -> int:  # type: ignore[override]
        self.calls.append(args[0])
        return self.value


@pytest.mark.parametrize("count", [*range(0, 30), 50, 100])
def test_backoff_stays_within_sidekiq_bounds(count: int) -> None:
    rng = random.Random(count)
    low = count**4 + 15
    high = count**4 + 15 + 9 * (count + 1)
    seen = {backoff_seconds(count, rng) for _ in range(300)}
    assert min(seen) >= low
    assert max(seen) <= high
    # Every value is count**4 + 15 + k * (count + 1) for an integer k in 0..9.
    assert all((s - low) % (count + 1) == 0 for s in seen)
    assert min(seen) == low and max(seen) == high  # 300 draws of rand(10) hit both ends


@pytest.mark.parametrize(
    ("count", "jitter", "expected"),
    [
        (0, 0, 15.0),
        (0, 9, 24.0),
        (1, 5, 1 + 15 + 5 * 2),
        (2, 3, 16 + 15 + 3 * 3),
        (10, 7, 10_000 + 15 + 7 * 11),
        (24, 9, 331_776 + 15 + 9 * 25),
    ],
)
def test_backoff_exact_value_with_stub_rng(count: int, jitter: int, expected: float) -> None:
    rng = FixedRng(jitter)
    assert backoff_seconds(count, rng) == expected
    assert rng.calls == [10]  # rand(10): 0..9


def test_backoff_default_rng_works() -> None:
    assert 15 <= backoff_seconds(0) <= 24


def test_total_default_retry_time_is_about_twenty_days() -> None:
    low = sum(backoff_seconds(n, FixedRng(0)) for n in range(25))
    high = sum(backoff_seconds(n, FixedRng(9)) for n in range(25))
    day = 24 * 3600
    assert 19 * day < low < high < 22 * day


@pytest.mark.parametrize(
    ("retry", "expected"),
    [(True, 25), (False, 0), (None, 0), (0, 0), (3, 3), (40, 40), (-2, 0)],
)
def test_max_attempts(retry: object, expected: int) -> None:
    assert max_attempts(retry, 25) == expected


def test_max_attempts_true_uses_the_configured_default() -> None:
    assert max_attempts(True, 7) == 7


class CustomError(Exception):
    class Inner(Exception):
        pass


@pytest.mark.parametrize(
    ("exc", "name"),
    [
        (ValueError("x"), "ValueError"),
        (KeyError("k"), "KeyError"),
        (json.JSONDecodeError("m", "d", 0), "json.decoder.JSONDecodeError"),
        (CustomError(), f"{__name__}.CustomError"),
        (CustomError.Inner(), f"{__name__}.CustomError.Inner"),
    ],
)
def test_error_class_name(exc: BaseException, name: str) -> None:
    assert error_class_name(exc) == name


def _raised() -> BaseException:
    def inner() -> None:
        raise RuntimeError("deep")

    def outer() -> None:
        inner()

    try:
        outer()
    except RuntimeError as exc:
        return exc
    raise AssertionError("not raised")


def test_backtrace_round_trip_innermost_first_in_ruby_form() -> None:
    exc = _raised()
    lines = decompress_backtrace(compress_backtrace(exc, 100))
    assert len(lines) == 3
    assert lines[0].endswith(":in `inner'")
    assert lines[1].endswith(":in `outer'")
    assert lines[2].endswith(":in `_raised'")
    filename, lineno, _ = lines[0].split(":", 2)
    assert filename == __file__
    assert int(lineno) > 0


def test_backtrace_is_limited_to_innermost_lines() -> None:
    lines = decompress_backtrace(compress_backtrace(_raised(), 1))
    assert len(lines) == 1
    assert lines[0].endswith(":in `inner'")


def test_backtrace_is_ascii_base64() -> None:
    text = compress_backtrace(_raised(), 10)
    assert text.isascii()
    assert "\n" not in text


RUBY = shutil.which("ruby")
needs_ruby = pytest.mark.skipif(RUBY is None, reason="ruby is not installed")


def _ruby(script: str, *args: str) -> str:
    assert RUBY is not None
    done = subprocess.run(
        [RUBY, "-rjson", "-rzlib", "-rbase64", "-e", script, *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout


@pytest.mark.ruby
@needs_ruby
def test_ruby_reads_our_backtrace() -> None:
    text = compress_backtrace(_raised(), 100)
    out = _ruby(
        "print JSON.generate(JSON.parse(Zlib::Inflate.inflate(Base64.decode64(ARGV[0]))))", text
    )
    assert json.loads(out) == decompress_backtrace(text)
    assert json.loads(out)[0].endswith(":in `inner'")


@pytest.mark.ruby
@needs_ruby
def test_we_read_sidekiqs_backtrace() -> None:
    # Sidekiq's JobRetry#compress_backtrace: Base64.encode64 (with newlines) of deflated JSON.
    lines = [f"app/jobs/hard_job.rb:{n}:in `perform'" for n in range(200)] + ["é ☃"]
    text = _ruby(
        "print Base64.encode64(Zlib::Deflate.deflate(JSON.generate(JSON.parse(ARGV[0]))))",
        json.dumps(lines),
    )
    assert "\n" in text
    assert decompress_backtrace(text) == lines
