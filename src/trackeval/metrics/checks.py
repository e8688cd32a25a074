"""Argument checks of the metric kernels: one function per kind of argument, each raising Python's own
``TypeError`` (wrong kind of value) or ``ValueError`` (right kind, wrong value) with a message that names the
argument, in the spirit of scikit-learn's ``validate_params``.

A kernel checks its arguments once, at its public entry, and passes the checked values on; the checks compute
nothing the kernel's numbers depend on.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "check_binary",
    "check_finite",
    "check_integer",
    "check_label_map",
    "check_number",
    "check_paired_1d",
    "check_same_shape",
    "is_integer",
    "is_number",
]


def is_number(value: object) -> bool:
    """Whether ``value`` is a real number (Python or numpy int or float), a bool not counted.

    >>> from trackeval.metrics.checks import is_number
    >>> is_number(2), is_number(np.float32(0.5)), is_number(True), is_number("1")
    (True, True, False, False)
    """
    return not isinstance(value, bool | np.bool_) and isinstance(value, int | float | np.integer | np.floating)


def is_integer(value: object) -> bool:
    """Whether ``value`` is an integer (Python or numpy), a bool not counted.

    >>> from trackeval.metrics.checks import is_integer
    >>> is_integer(3), is_integer(np.uint8(3)), is_integer(3.0), is_integer(np.bool_(True))
    (True, True, False, False)
    """
    return not isinstance(value, bool | np.bool_) and isinstance(value, int | np.integer)


def _range(at_least: float | None, at_most: float | None) -> str:
    if at_most is None:
        return f">= {at_least}"
    return f"in [{at_least}, {at_most}]"


def check_number(name: str, value: object, at_least: float | None = None, at_most: float | None = None) -> float:
    """``value`` as a float: a number (:func:`is_number`) within ``[at_least, at_most]`` (a bound left None is
    open; NaN is within no range).

    Raises:
        TypeError: not a number (``"<name> must be a number, got <value>"``).
        ValueError: outside the range (``"<name> must be >= <at_least>, got <value>"``, or ``"... must be in
            [<at_least>, <at_most>]"``).

    >>> from trackeval.metrics.checks import check_number
    >>> check_number("percentile", 95, 0, 100)
    95.0
    >>> check_number("tolerance_mm", float("nan"), 0)
    Traceback (most recent call last):
    ...
    ValueError: tolerance_mm must be >= 0, got nan
    """
    if not is_number(value):
        raise TypeError(f"{name} must be a number, got {value!r}")
    f = float(value)  # type: ignore[arg-type]
    if not ((at_least is None or f >= at_least) and (at_most is None or f <= at_most)):  # also rejects NaN
        raise ValueError(f"{name} must be {_range(at_least, at_most)}, got {value!r}")
    return f


def check_integer(name: str, value: object, at_least: int) -> int:
    """``value`` as an int: an integer (:func:`is_integer`) ``>= at_least``.

    >>> from trackeval.metrics.checks import check_integer
    >>> check_integer("threads", np.int64(4), 1)
    4
    >>> check_integer("threads", 0, 1)
    Traceback (most recent call last):
    ...
    ValueError: threads must be >= 1, got 0
    """
    if not is_integer(value):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < at_least:  # type: ignore[operator]
        raise ValueError(f"{name} must be >= {at_least}, got {value!r}")
    return int(value)  # type: ignore[call-overload]


def check_label_map(name: str, value: object, ndims: tuple[int, ...]) -> np.ndarray:
    """``value`` itself: a numpy array of integer or bool dtype with one of ``ndims`` dimensions.

    Raises:
        TypeError: not a numpy array, or another dtype.
        ValueError: another number of dimensions (``"<name> must be 2D or 3D, got 1D with shape (4,)"``).

    >>> from trackeval.metrics.checks import check_label_map
    >>> check_label_map("pred", np.zeros((2, 2), dtype=np.uint8), (2, 3)).shape
    (2, 2)
    >>> check_label_map("pred", np.zeros(4, dtype=int), (2, 3))
    Traceback (most recent call last):
    ...
    ValueError: pred must be 2D or 3D, got 1D with shape (4,)
    """
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(value).__name__}")
    if not (np.issubdtype(value.dtype, np.integer) or value.dtype == np.bool_):
        raise TypeError(f"{name} must have an integer or bool dtype, got {value.dtype}")
    if value.ndim not in ndims:
        shown = " or ".join(f"{n}D" for n in ndims)
        raise ValueError(f"{name} must be {shown}, got {value.ndim}D with shape {value.shape}")
    return value


def check_same_shape(names: tuple[str, str], first: np.ndarray, second: np.ndarray) -> None:
    """ValueError unless the two arrays (named ``names``) have the same shape.

    >>> from trackeval.metrics.checks import check_same_shape
    >>> check_same_shape(("pred", "truth"), np.zeros((2, 3)), np.zeros((3, 2)))
    Traceback (most recent call last):
    ...
    ValueError: pred and truth must have the same shape, got pred (2, 3) and truth (3, 2)
    """
    if first.shape != second.shape:
        raise ValueError(
            f"{names[0]} and {names[1]} must have the same shape, "
            f"got {names[0]} {first.shape} and {names[1]} {second.shape}"
        )


def check_paired_1d(names: tuple[str, str], first: np.ndarray, second: np.ndarray) -> None:
    """ValueError unless both arrays (named ``names``) are 1D of equal length: one entry of each per item.

    >>> from trackeval.metrics.checks import check_paired_1d
    >>> check_paired_1d(("y", "scores"), np.zeros(3), np.zeros(2))
    Traceback (most recent call last):
    ...
    ValueError: y and scores must be 1D of equal length, got (3,) and (2,)
    """
    if first.ndim != 1 or first.shape != second.shape:
        raise ValueError(f"{names[0]} and {names[1]} must be 1D of equal length, got {first.shape} and {second.shape}")


def check_binary(name: str, values: np.ndarray) -> None:
    """ValueError unless every entry of ``values`` is 0 or 1 (bool, integer or float).

    >>> from trackeval.metrics.checks import check_binary
    >>> check_binary("y", np.array([0, 1, 1]))
    >>> check_binary("y", np.array([0, 2]))
    Traceback (most recent call last):
    ...
    ValueError: y must hold only 0 and 1
    """
    if values.size and not np.isin(values, (0, 1)).all():
        raise ValueError(f"{name} must hold only 0 and 1")


def check_finite(name: str, values: np.ndarray) -> None:
    """ValueError unless every entry of the float array ``values`` is finite.

    >>> from trackeval.metrics.checks import check_finite
    >>> check_finite("scores", np.array([0.5, np.inf]))
    Traceback (most recent call last):
    ...
    ValueError: scores must be finite
    """
    if not np.isfinite(values).all():
        raise ValueError(f"{name} must be finite")
