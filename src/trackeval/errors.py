"""Exceptions with enough context for a one-line, actionable error message, and the mapping of any exception
that reaches a command-line boundary to an exit status and one line (:func:`report_failure`).

Every exception the documentation names is importable from here (:data:`__all__`):

* :class:`TrackevalError`: the base class of every deliberate error (exit 2 in the CLI);
* :class:`InputError`: bad input, naming the file, case and field; :class:`WorkerDied`, an ``InputError``: a worker
  process died while scoring, naming the cases;
* :class:`ConfigError`: a bad params file, override or protocol switch;
* :class:`OutputError`: the outputs could not be written;
* :class:`TrackingError`: MLflow could not be reached or refused a call (redacted message).

Messages are written once and name options as the caller passes them (:func:`spoken`, :func:`worded`): ``pass
--replace`` in the CLI, ``pass replace=True`` in Python. What ``--debug`` shows is decided here too: tracebacks
(:func:`report_failure`) and MLflow's own log lines (:func:`log_levels`, used by the CLI and the Python API).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator

__all__ = [
    "ConfigError",
    "InputError",
    "OutputError",
    "TrackevalError",
    "TrackingError",
    "WorkerDied",
    "cli_caller",
    "describe_failure",
    "log_levels",
    "report_failure",
    "spoken",
    "worded",
]

#: who is calling: ``python`` (the library, the default) or ``cli`` (set by :func:`trackeval.cli.main` while a
#: command runs, :func:`cli_caller`). Messages are written once, naming the CLI's options; :func:`spoken` says
#: them the way the caller passes that option.
CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("trackeval_caller", default="python")
#: the CLI's options in messages, and how a Python caller passes the same thing (the first match wins)
PYTHON_SPELLING = (
    ("--model-name and --model-version", "model= and version="),
    ("--workers 1", "engine.workers=1"),
    ("in the --set value", "in the override"),
    ("--set", "override"),
    ("--replace", "replace=True"),
    ("--dry-run", "dry_run=True"),
    ("--trusted-key", "trusted_keys="),
    ("run `trackeval track` first", "track a version first (trackeval.track)"),
    ("run `trackeval promote` again", "call trackeval.promote again"),
)
_SPELLING = re.compile("|".join(rf"(?<![\w-]){re.escape(flag)}(?![\w-])" for flag, _ in PYTHON_SPELLING))


@contextlib.contextmanager
def cli_caller() -> Iterator[None]:
    """While the block runs, messages name the CLI's options (``--replace``), not keyword arguments."""
    token = CALLER.set("cli")
    try:
        yield
    finally:
        CALLER.reset(token)


def spoken(message: str) -> str:
    """``message`` as the caller passes options: as written (the CLI's flags) for the CLI, with each of
    :data:`PYTHON_SPELLING`'s flags in its Python spelling (``pass replace=True``) for a Python caller."""
    if CALLER.get() == "cli":
        return message
    python = dict(PYTHON_SPELLING)
    return _SPELLING.sub(lambda m: python[m.group(0)], message)


def worded(cli: str, python: str) -> str:
    """``cli`` when the CLI is calling, else ``python``: for a phrase whose Python form is not a respelling of
    its flags (:func:`spoken`), such as the command line to run again, which names the folders given to the
    CLI, where a Python caller may have passed result objects (written to a temporary folder it never saw).

    >>> worded("run `trackeval track out/v1` again", "call trackeval.track again")
    'call trackeval.track again'
    """
    return cli if CALLER.get() == "cli" else python


class TrackevalError(Exception):
    """Base class of every error trackeval raises on purpose (exit code 2 in the CLI). Its text names options
    the way the caller passes them (:func:`spoken`)."""

    def __str__(self) -> str:
        return spoken(super().__str__())


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
        where = [
            f"{k}={_printable(v)}" for k, v in (("file", self.file), ("case", self.case_id), ("field", self.field)) if v
        ]
        message = spoken(self.message)
        return f"{message} [{', '.join(where)}]" if where else message

    def __reduce__(self):  # picklable across process pools, subclasses included
        return (_rebuild_input_error, (type(self), self.message, self.file, self.case_id, self.field))


def _printable(value: str) -> str:
    """``value`` as is, or its ``repr`` when it holds a line break or another non-printable character (a case id
    read from user data may hold anything; the error must stay on one line and show what is there)."""
    return value if value.isprintable() else repr(value)


def _rebuild_input_error(
    cls: type[InputError], message: str, file: str | None, case_id: str | None, field: str | None
) -> InputError:
    return cls(message, file=file, case_id=case_id, field=field)


class WorkerDied(InputError):
    """A worker process died while scoring (a signal such as the out-of-memory killer's SIGKILL, or an exit): the
    message names the case(s) it was scoring, how it died and the likely cause; ``case_id`` lists the cases."""


class ConfigError(TrackevalError):
    """Invalid configuration (params file, --set override or protocol switch)."""


class OutputError(TrackevalError):
    """The outputs could not be written (read-only folder, disk full, a file where a folder should be)."""


class TrackingError(TrackevalError):
    """MLflow could not be reached or refused a call after the bounded retries. trackeval raises it through
    :func:`trackeval.tracking.client.tracking_error`, which redacts the message (the URI's userinfo, credentials
    quoted by MLflow's exception: :func:`~trackeval.io.redact.redact`)."""


#: exit status of bad input (deliberate errors, unreadable paths, invalid data models) and of internal errors
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 1
#: exit status after Ctrl-C (128 + SIGINT, the shell convention)
EXIT_INTERRUPTED = 130
#: the longest message kept on the one error line (a library may put a whole file into its exception)
MAX_MESSAGE_CHARS = 1000
DEBUG_HINT = "run with --debug for the traceback"
#: environment variable that turns on ``--debug`` (``1``, ``true``, ``yes`` or ``on``)
DEBUG_ENV = "TRACKEVAL_DEBUG"


def debug_from_env() -> bool:
    """Whether :data:`DEBUG_ENV` asks for tracebacks."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on")


#: MLflow's own loggers (``alembic``: its database migrations): WARNING unless ``--debug`` (:func:`log_levels`)
QUIET_LOGGERS = ("mlflow", "alembic")
#: the variable MLflow reads its loggers' level from when it is imported
MLFLOW_LEVEL_ENV = "MLFLOW_LOGGING_LEVEL"


@contextlib.contextmanager
def log_levels(debug: bool) -> Iterator[None]:
    """While a command (or a Python API call) runs: with ``debug``, trackeval's loggers at DEBUG and MLflow's and
    alembic's (database migrations) at INFO; without, MLflow's and alembic's at WARNING, so their INFO lines
    (``Creating initial MLflow database tables...``) stay off the terminal. MLflow sets its loggers' levels when
    it is imported (from ``MLFLOW_LOGGING_LEVEL``), which is lazy: without ``debug`` that variable says WARNING
    for the command; with it MLflow is imported first. Levels and the variable are restored afterwards (``main``
    may run many times in one process). The CLI wraps every command in it, the Python API each call that reaches
    MLflow (``trackeval.track``, ``compare``, ``promote``, ``verify``; ``debug`` from :data:`DEBUG_ENV`),
    importing MLflow first: its loggers keep their own level (INFO) for the caller's code after the call."""
    if debug:
        import mlflow  # noqa: F401 - configures its loggers now, so the levels below are not overwritten later
    levels = {"trackeval": logging.DEBUG} if debug else {}
    levels |= dict.fromkeys(QUIET_LOGGERS, logging.INFO if debug else logging.WARNING)
    saved = {name: logging.getLogger(name).level for name in levels}
    saved_env = os.environ.get(MLFLOW_LEVEL_ENV)
    if not debug:
        os.environ[MLFLOW_LEVEL_ENV] = "WARNING"
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    try:
        yield
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)
        if saved_env is None:
            os.environ.pop(MLFLOW_LEVEL_ENV, None)
        else:
            os.environ[MLFLOW_LEVEL_ENV] = saved_env


def _one_line(text: str, clean: Callable[[str], str] | None = None) -> str:
    """``text`` with every run of whitespace (newlines included) as one space, then ``clean``-ed (redacted: before
    the cut, which could otherwise hide half a secret from it), cut at :data:`MAX_MESSAGE_CHARS`."""
    line = " ".join(text.split())
    line = line if clean is None else clean(line)
    return line if len(line) <= MAX_MESSAGE_CHARS else line[: MAX_MESSAGE_CHARS - 3] + "..."


def describe_failure(exc: BaseException, command: str, *, clean: Callable[[str], str] | None = None) -> tuple[int, str]:
    """The exit status and the one-line message (without the ``trackeval: error:`` prefix) of ``exc`` escaping
    ``trackeval <command>``; ``clean`` is applied to the message (the CLI passes
    :func:`trackeval.io.redact.redact`: no secret in any error line).

    The mapping (documented in ``docs/troubleshooting.md``):

    * :class:`TrackevalError` (``InputError``, ``ConfigError``, ``OutputError``...): 2, its own message;
    * ``OSError`` (a path that does not exist, a permission, a full disk, an unreachable server): 2, the
      reason and ``file=`` when the OS named one;
    * ``pydantic.ValidationError`` (a data model a library built from user data): 2, the first field;
    * :class:`KeyboardInterrupt`: 130 (Ctrl-C);
    * anything else (``GeneratorExit`` included) is a bug: 1,
      ``internal error in trackeval <command>: <Type>: <message>``.

    Every message except a deliberate one names the command and ends with the ``--debug`` hint.
    """
    from pydantic import ValidationError

    if isinstance(exc, TrackevalError):
        return EXIT_BAD_INPUT, _one_line(str(exc), clean)
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED, f"trackeval {command}: interrupted (Ctrl-C)"
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc) or type(exc).__name__
        where = InputError(f"trackeval {command}: {type(exc).__name__}: {reason}", file=_filename(exc))
        return EXIT_BAD_INPUT, f"{_one_line(str(where), clean)} ({DEBUG_HINT})"
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or None
        where = InputError(f"trackeval {command}: invalid {exc.title}: {first['msg']}", field=loc)
        return EXIT_BAD_INPUT, f"{_one_line(str(where), clean)} ({DEBUG_HINT})"
    message = _one_line(f"internal error in trackeval {command}: {type(exc).__name__}: {exc}", clean)
    return EXIT_INTERNAL, f"{message} ({DEBUG_HINT}; please report it)"


def _filename(exc: OSError) -> str | None:
    """The path an ``OSError`` names (``filename``, else ``filename2``), as text."""
    name = exc.filename if exc.filename is not None else exc.filename2
    return None if name is None else str(name)


def report_failure(
    exc: BaseException, command: str, *, debug: bool = False, clean: Callable[[str], str] | None = None
) -> int:
    """Print ``exc`` as one ``trackeval: error: ...`` line on stderr (after its traceback when ``debug``) and
    return the exit status (:func:`describe_failure`); ``clean`` is applied to the line and the traceback."""
    if debug:
        text = "".join(traceback.format_exception(exc))
        sys.stderr.write(text if clean is None else clean(text))
    status, message = describe_failure(exc, command, clean=clean)
    print(f"trackeval: error: {message}", file=sys.stderr)
    return status
