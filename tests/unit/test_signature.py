"""Signatures (Celery's ``.s()``): the class, arguments bound to ``perform`` and options."""

from __future__ import annotations

import pytest

import rfetch
from rfetch.errors import ArgsMismatch, ConfigError
from rfetch.jobs.signature import Signature


class Resize(rfetch.Job):
    name = "sig.Resize"

    def perform(self, image_id: int, width: int = 100) -> None: ...


@rfetch.job(name="sig.thumb")
def thumb(image_id: int) -> None: ...


def test_s_binds_keyword_arguments_to_positions() -> None:
    sig = Resize.s(7, width=320)
    assert isinstance(sig, Signature)
    assert sig.job_class is Resize
    assert sig.args == (7, 320)
    assert sig.options == {}
    assert sig.name == "sig.Resize"


def test_set_returns_a_new_signature_with_options() -> None:
    sig = Resize.s(7)
    queued = sig.set(queue="images", store_result=60)
    assert sig.options == {}
    assert queued.options == {"queue": "images", "store_result": 60}
    assert Resize.set(queue="images").s(7).options == {"queue": "images"}
    assert repr(queued) == "sig.Resize.s(7).set(queue='images', store_result=60)"


def test_function_jobs_have_s() -> None:
    assert thumb.s(3).args == (3,)


def test_bad_arguments_and_options_are_refused_at_once() -> None:
    with pytest.raises(ArgsMismatch):
        Resize.s()
    with pytest.raises(ConfigError):
        Resize.s(1).set(colour="red")
    with pytest.raises(ConfigError, match="client"):
        Resize.s(1).set(client=None)
