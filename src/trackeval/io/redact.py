"""Secrets never reach a terminal, a log or a store: the one place trackeval redacts them.

:func:`redact` masks, in any text:

- the userinfo of every URI (``http://alice:S3cret@host`` -> ``http://alice:***@host``; a user without a password,
  often a token, ``https://TOKEN@host`` -> ``https://***@host``);
- the values of the credential variables MLflow and its artifact stores read (:data:`SECRET_ENV`:
  ``MLFLOW_TRACKING_PASSWORD``, ``MLFLOW_TRACKING_TOKEN``...), as they are, percent-encoded and, with
  ``MLFLOW_TRACKING_USERNAME``, as the base64 of a basic-auth header, wherever they appear (values of at least
  :data:`MIN_SECRET_CHARS` characters; shorter ones only in the positions below);
- the passwords of the URIs seen by :func:`remember_uri` (the tracking URI), the same way;
- anything that looks like a credential: ``password=...``, ``token: ...``, ``api_key=...`` (any key naming a
  password, token, secret or API key), an ``Authorization`` header's value and a ``Bearer`` token.

Where it is applied: the CLI's error boundary and its standard output and error (:func:`redacted_output`, which
every printed line, progress bar and traceback of a command passes through), the log records of trackeval's
tracking loggers (:func:`logger`, :class:`RedactFilter`) and of every handler the CLI prints with
(:func:`install_log_filter`), the tracking errors (``TrackingError``), the links and URIs ``track`` prints
(:func:`redact_uri`) and the params ``track`` writes to MLflow.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO
from urllib.parse import quote, urlsplit

#: what a secret is replaced with
MASK = "***"
#: environment variables whose values are secrets (MLflow's tracking credentials, Databricks, the artifact stores)
SECRET_ENV = (
    "MLFLOW_TRACKING_PASSWORD",
    "MLFLOW_TRACKING_TOKEN",
    "MLFLOW_AUTH_ADMIN_PASSWORD",
    "MLFLOW_FLASK_SERVER_SECRET_KEY",
    "DATABRICKS_TOKEN",
    "DATABRICKS_CLIENT_SECRET",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_ACCESS_KEY",
    "AZURE_CLIENT_SECRET",
)
#: the user name that goes with ``MLFLOW_TRACKING_PASSWORD`` in a basic-auth header
USERNAME_ENV = "MLFLOW_TRACKING_USERNAME"
#: a secret value shorter than this is masked only where it stands as a credential (URI userinfo, ``password=``):
#: masking a 3-character string everywhere would also cut it out of run ids and digests
MIN_SECRET_CHARS = 6

# scheme://userinfo@ : the netloc ends at / ? # or whitespace; its userinfo at its last @ (the greedy class)
_URI_USERINFO = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^\s/?#@'\"<>]*(?:@[^\s/?#@'\"<>]*)*)@"
)
# key=value / key: value / "key": "value" where the key names a credential
_KEYED = re.compile(
    r"(?P<key>\b[\w.\-]*(?:password|passwd|passphrase|token|secret|api[_\-]?key|access[_\-]?key)"
    r"[\w\-]*)(?P<sep>['\"]?\s*[=:]\s*['\"]?)(?P<value>[^\s'\"&,;)}\]]+)",
    re.IGNORECASE,
)
_AUTH_HEADER = re.compile(
    r"(?P<head>\bauthorization['\"]?\s*[:=]\s*['\"]?(?:(?:basic|bearer|token|digest)\s+)?)(?P<value>[^\s'\",;)}\]]+)",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<head>\bBearer\s+)(?P<value>[A-Za-z0-9\-._~+/]{8,}=*)")

_remembered: set[str] = set()


def _credential_shaped(value: str) -> bool:
    """A value that may be a credential: not a plain lower-case word (digits, capitals after the first letter,
    symbols, or 16 characters and more)."""
    return len(value) >= 16 or value[1:] != value[1:].lower() or not value.isalpha()


def _keyed_value(m: re.Match[str]) -> str:
    """The replacement of a :data:`_KEYED` match: the value masked, where it is one.

    Values, not prose: a quote before the separator must have opened right before the key (``"password": x``),
    else the "key" is the end of a quoted value (``'../../etc/passwd': letters``) and nothing is masked; a value
    after ``key: `` / ``key = `` (spaced, unquoted) is masked only when credential-shaped (``the password: is
    required`` keeps its words); ``key=value`` and a quoted value are always masked.
    """
    sep, start = m["sep"], m.start("key")
    quote = sep[:1] if sep[:1] in "'\"" else ""
    if quote and (start == 0 or m.string[start - 1] != quote):
        return m.group(0)
    quoted_value = sep[-1] in "'\""  # the separator ends in a quote only when one opens the value
    if not quoted_value and any(c.isspace() for c in sep) and not _credential_shaped(m["value"]):
        return m.group(0)
    return m["key"] + sep + MASK


_lock = threading.Lock()


def _userinfo(match: re.Match[str]) -> str:
    user, colon, _ = match["userinfo"].partition(":")
    return f"{match['scheme']}{user}:{MASK}@" if colon else f"{match['scheme']}{MASK}@"


def _variants(value: str) -> set[str]:
    """``value`` as it may be printed: as is and percent-encoded."""
    return {value, quote(value, safe=""), quote(value, safe="~!$&'()*+,;=")}


def _secrets() -> list[str]:
    """Every literal secret known now, longest first (so a secret holding another one is masked whole)."""
    found: set[str] = set()
    with _lock:
        found |= _remembered
    for name in SECRET_ENV:
        value = os.environ.get(name)
        if value:
            found |= _variants(value)
    user, password = os.environ.get(USERNAME_ENV), os.environ.get("MLFLOW_TRACKING_PASSWORD")
    if user and password:
        found.add(base64.b64encode(f"{user}:{password}".encode()).decode())
    return sorted((s for s in found if len(s) >= MIN_SECRET_CHARS), key=len, reverse=True)


def remember_uri(uri: str) -> None:
    """Mask the password (or user-only token) of ``uri`` wherever it appears from now on, not only inside the URI
    (an error message may quote it apart)."""
    try:
        parts = urlsplit(uri)
        secret = parts.password if parts.password is not None else (parts.username if "@" in parts.netloc else None)
    except ValueError:
        return
    if secret:
        from urllib.parse import unquote

        with _lock:
            _remembered.update(_variants(unquote(secret)) | {secret})


def redact(text: str) -> str:
    """``text`` with every secret masked (module docstring); text without one is returned unchanged."""
    if not text:
        return text
    text = _URI_USERINFO.sub(_userinfo, text)
    text = _AUTH_HEADER.sub(lambda m: m["head"] + MASK, text)
    text = _BEARER.sub(lambda m: m["head"] + MASK, text)
    text = _KEYED.sub(_keyed_value, text)
    for secret in _secrets():
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redact_uri(uri: str) -> str:
    """A URI as it may be shown: ``http://alice:***@host:5000`` (the same as :func:`redact`)."""
    return redact(uri)


def without_userinfo(url: str) -> str:
    """``url`` without its userinfo (``http://alice:pw@host/x`` -> ``http://host/x``): a link to open, for which
    the browser asks the credentials itself."""
    return _URI_USERINFO.sub(lambda m: m["scheme"], url)


class RedactFilter(logging.Filter):
    """A logging filter that redacts a record's message (its arguments merged in) and its exception text."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record: the handler reports it as logging does
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


_FILTER = RedactFilter()


def logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` with :class:`RedactFilter` on it (trackeval's loggers that may see a URI or an
    MLflow error: records are redacted before any handler, the test suite's and an embedding application's too)."""
    log = logging.getLogger(name)
    if _FILTER not in log.filters:
        log.addFilter(_FILTER)
    return log


def install_log_filter(*names: str) -> None:
    """Put :class:`RedactFilter` on every handler of the root logger and of the loggers ``names`` (``mlflow``
    prints through its own handler), so that every record they print is redacted, whoever logged it."""
    for name in ("", *names):
        for handler in logging.getLogger(name).handlers:
            if _FILTER not in handler.filters:
                handler.addFilter(_FILTER)


class RedactingStream:
    """A text stream that redacts what is written to ``inner``, a line at a time (a secret split over two writes
    of one line is still masked); :meth:`flush` passes a partial line on (progress bars, prompts)."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self._pending = ""
        self._lock = threading.RLock()

    def write(self, text: str) -> int:
        with self._lock:
            self._pending += text
            if "\n" in self._pending:
                done, _, self._pending = self._pending.rpartition("\n")
                self.inner.write(redact(done + "\n"))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        with self._lock:
            if self._pending:
                self.inner.write(redact(self._pending))
                self._pending = ""
            self.inner.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, errors...: the inner stream's
        return getattr(self.inner, name)


@contextlib.contextmanager
def redacted_output() -> Iterator[None]:
    """Route ``sys.stdout`` and ``sys.stderr`` through :class:`RedactingStream` while the block runs (a CLI
    command), then flush and restore them."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(saved[0]), RedactingStream(saved[1])
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        sys.stdout, sys.stderr = saved
