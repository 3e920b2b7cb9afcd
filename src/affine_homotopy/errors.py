"""Error and warning types of the project: one per kind of problem, all importable without side effects.

Every error a user can cause (a bad config, bad data, a model that cannot be staged, arrays that
cannot be compared) is one of these, with a message that names the key or file, the value found and
the fix. Workflow jobs catch :class:`AffineHomotopyError` and end with that one message (no
traceback); anything else is a bug and keeps its traceback.

``ConfigError`` and ``DataError`` are also ``ValueError`` (the library API raises them for bad
arguments); ``NumericalError`` is also ``FloatingPointError`` (non-finite representations, a broken
bound).

Structured fields: every error may name what it is about, so callers react to fields, never to the
message's text. ``argument``: the function argument at fault (``"tol"``, ``"source"``); ``key``: the
study config key (``"intrinsic.solver"``), set by the study layer where it translates an argument to
its key; ``value``: the value found (``None`` when not recorded).

Warnings of the library API: :class:`ConvergenceWarning` (a certified interval wider than ``tol``:
the value is still an upper bound attained by a map) and :class:`UpcastWarning` (integer or float16
input converted to float64).
"""

from __future__ import annotations


class AffineHomotopyError(Exception):
    """Base class of every expected, user-facing error of this project (fields: module docstring)."""

    def __init__(self, *args: object, argument: str | None = None, key: str | None = None,
                 value: object = None) -> None:
        super().__init__(*args)
        self.argument, self.key, self.value = argument, key, value

    def __reduce__(self) -> tuple:
        # the fields travel with a pickled error (a worker process's), not only its message
        return (self.__class__, self.args, {"argument": self.argument, "key": self.key, "value": self.value})


class ConfigError(AffineHomotopyError, ValueError):
    """A setting out of range or of the wrong type: a study config key (``key``, raised before any job) or a
    library function's argument (``argument``)."""


class DataError(AffineHomotopyError, ValueError):
    """Input data that cannot be used: a malformed task file, an empty split, mismatched arrays."""


class StagingError(AffineHomotopyError, OSError):
    """A model or data set that could not be fetched or found (hub, local cache, package, folder)."""


class NumericalError(AffineHomotopyError, FloatingPointError):
    """Non-finite representations, or a result that breaks a proven inequality (a bug, not a finding)."""


class ConvergenceWarning(UserWarning):
    """A certified interval that is wider than the requested ``tol`` (the solver hit ``max_iter``)."""


class UpcastWarning(UserWarning):
    """Input of an integer or half-precision dtype, converted to float64 before any maths."""
