"""Exceptions with enough context for a one-line, actionable error message."""

from __future__ import annotations


class TrackevalError(Exception):
    """Base class of every error trackeval raises on purpose (exit code 2 in the CLI)."""


class InputError(TrackevalError):
    """Invalid input: names the offending file, case and field so the user can fix it.

    Args:
        message: what is wrong, in plain words.
        file: the file (or folder) that holds the bad input.
        case_id: the case concerned, when there is one.
        field: the column, header field or key concerned, when there is one.
    """

    def __init__(
        self, message: str, *, file: str | None = None, case_id: str | None = None, field: str | None = None
    ) -> None:
        self.message = " ".join(message.split())  # one line, whatever the wrapped library said
        self.file = file
        self.case_id = case_id
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = [f"{k}={v}" for k, v in (("file", self.file), ("case", self.case_id), ("field", self.field)) if v]
        return f"{self.message} [{', '.join(where)}]" if where else self.message

    def __reduce__(self):  # picklable across process pools
        return (_rebuild_input_error, (self.message, self.file, self.case_id, self.field))


def _rebuild_input_error(message: str, file: str | None, case_id: str | None, field: str | None) -> InputError:
    return InputError(message, file=file, case_id=case_id, field=field)


class ConfigError(TrackevalError):
    """Invalid configuration (params file, --set override or protocol switch)."""


class OutputError(TrackevalError):
    """The outputs could not be written (read-only folder, disk full, a file where a folder should be)."""
