"""What arguments a job's ``perform`` can take, checked when a job is pushed.

A job's arguments travel as a JSON list (Sidekiq's ``args``) and the worker calls
``perform(*args)``; a push with the wrong number of arguments would be accepted and fail
only in the worker, on every retry. :meth:`Arity.check` refuses it at the push instead,
from ``perform``'s own signature: parameters with defaults may be left out, ``*args`` takes
any number more, ``**kwargs`` and keyword-only parameters with a default are never filled;
a keyword-only parameter without one can never be given (a list has no place for it).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rfetch.errors import ArgsMismatch
from rfetch.formatting import shorten


def raw_perform(job_class: type) -> object:
    """``perform`` as the class (or its nearest base) defines it: the plain function, or
    the staticmethod / classmethod object (not a new bound method on each access)."""
    for klass in job_class.__mro__:
        if "perform" in klass.__dict__:
            return klass.__dict__["perform"]
    return None


@dataclass(frozen=True)
class Arity:
    """The positional arguments ``perform`` accepts.

    Attributes:
        raw: the ``perform`` this was read from (see :func:`raw_perform`).
        minimum: arguments without a default.
        maximum: all positional parameters; None when ``perform`` has ``*args``.
        required_keywords: keyword-only parameters without a default.
        signature: ``perform``'s parameters without ``self`` and annotations, for messages.
        method: the method named in messages (an iterable job's ``build_enumerator``).
    """

    raw: object
    minimum: int
    maximum: int | None
    required_keywords: tuple[str, ...]
    signature: str
    method: str = "perform"

    @classmethod
    def of(cls, job_class: type, perform: Callable[..., Any]) -> Arity:
        """Read ``perform`` (as ``job_class.perform`` returns it) of ``job_class``."""
        raw = raw_perform(job_class)
        try:
            parameters = list(inspect.signature(perform).parameters.values())
        except (TypeError, ValueError):  # no signature to read (a C callable): take anything
            return cls(raw, 0, None, (), "(...)")
        if not isinstance(raw, (staticmethod, classmethod)) and parameters:
            parameters = parameters[1:]  # self
        positional = [
            p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        variadic = any(p.kind is p.VAR_POSITIONAL for p in parameters)
        return cls(
            raw=raw,
            minimum=sum(1 for p in positional if p.default is p.empty),
            maximum=None if variadic else len(positional),
            required_keywords=tuple(
                p.name for p in parameters if p.kind is p.KEYWORD_ONLY and p.default is p.empty
            ),
            signature=str(
                inspect.Signature([p.replace(annotation=p.empty) for p in parameters])
            ),
        )

    def check(self, job_name: str, args: Sequence[Any]) -> None:
        """Raise unless ``perform(*args)`` fits the signature.

        Raises:
            ArgsMismatch: too few or too many arguments, or ``perform`` has a keyword-only
                parameter without a default (no push can ever fill it).
        """
        count = len(args)
        if not self.required_keywords and count >= self.minimum and (
            self.maximum is None or count <= self.maximum
        ):
            return  # the common case, once per job of a bulk push: nothing formatted
        where = f"{job_name}.{self.method}{self.signature}"
        if self.required_keywords:
            raise ArgsMismatch(
                f"{where} has keyword-only parameter(s) {list(self.required_keywords)} "
                "without a default: a job's arguments travel as a JSON list (Sidekiq's "
                "args), so no push can give them; make them positional or give a default"
            )
        if count >= self.minimum and (self.maximum is None or count <= self.maximum):
            return
        if self.maximum is None:
            wanted = f"at least {self.minimum}"
        elif self.minimum == self.maximum:
            wanted = str(self.minimum)
        else:
            wanted = f"{self.minimum} to {self.maximum}"
        plural = "" if (self.minimum if self.maximum is None else self.maximum) == 1 else "s"
        raise ArgsMismatch(
            f"{where} takes {wanted} argument{plural}, got {count}: {shorten(repr(list(args)))}; "
            "nothing was pushed (the worker would fail it on every retry)"
        )


def positional_args(perform: Callable[..., Any], name: str, args: Sequence[Any],
                    kwargs: Mapping[str, Any]) -> list[Any]:
    """A job's arguments as the positional list a payload carries (Sidekiq's ``args``):
    keyword arguments bound to ``perform``'s parameters (see
    :meth:`rfetch.Job.positional_args`); ``name`` is the job's name in messages.

    Raises:
        TypeError: a keyword that ``perform`` does not take, a missing parameter, or a
            keyword-only parameter (a JSON list has no place for it).
    """
    if not kwargs:
        return list(args)
    signature = inspect.signature(perform)
    positional = {
        p.name
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    }
    try:
        bound = signature.bind(None, *args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{name}.perform{signature}: {exc}") from None
    not_positional = sorted(set(kwargs) - positional)
    if not_positional:
        raise TypeError(
            f"{name}.perform{signature}: {not_positional} cannot be sent by "
            "keyword: a job's arguments travel as a JSON list (Sidekiq's args), so "
            "only parameters that can be given by position can be sent"
        )
    # Up to the last parameter given, in order; one skipped on the way takes its default.
    params = list(signature.parameters.values())[1:]
    given = [i for i, p in enumerate(params) if p.name in bound.arguments]
    values: list[Any] = []
    for param in params[: max(given, default=-1) + 1]:
        if param.kind is param.VAR_POSITIONAL:
            values.extend(bound.arguments.get(param.name, ()))
        else:
            values.append(bound.arguments.get(param.name, param.default))
    return values
