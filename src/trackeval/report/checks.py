"""Gate checks in short: one line per check for places with little room (the leaderboard's gate column, a
decision run's description, a version's gate history), and the scope of a check as people read it.

A check of one unit names the unit; a check the gate applies to every unit of the decision at once (the
worst-group guard's pass: one Holm family over all groups of all units) is stored with the unit ``*`` and shown as
``all units`` (:func:`check_scope`). Numbers have 4 significant digits (:func:`shown`), deltas a sign.
"""

from __future__ import annotations

import math

from trackeval.gate.decide import Check, Decision

#: how a check applied to every unit of a decision (stored ``*``) is shown
ALL_UNITS = "all units"
#: the longest detail a short form quotes as it is (pairing, audit... reasons)
SHORT_DETAIL = 100


def shown(x: float | None) -> str:
    """``x`` for people: 4 significant digits (``0.9300``-style fixed for magnitudes in [1e-3, 1e4)); ``-`` for
    None or NaN.

    >>> shown(0.7165255946287141), shown(12.3456), shown(None), shown(0.0)
    ('0.7165', '12.35', '-', '0.000')
    """
    if x is None or math.isnan(x):
        return "-"
    if x == 0 or 1e-3 <= abs(x) < 1e4:
        digits = 3 if x == 0 else max(0, 3 - math.floor(math.log10(abs(x))))
        return f"{x:.{digits}f}"
    return f"{x:.3e}"


def signed(x: float | None) -> str:
    """:func:`shown` with a ``+`` on non-negative numbers (a delta).

    >>> signed(0.2466), signed(-0.2), signed(None)
    ('+0.2466', '-0.2000', '-')
    """
    text = shown(x)
    return text if x is None or math.isnan(x) or x < 0 else "+" + text


def check_scope(unit: str) -> str:
    """The unit a check applies to as shown: ``all units`` for ``*`` (module docstring).

    >>> check_scope("umd"), check_scope("*")
    ('umd', 'all units')
    """
    return ALL_UNITS if unit == "*" else unit


def _interval(delta: float | None, low: float | None, high: float | None) -> str:
    return f"{signed(delta)} [{signed(low)}, {signed(high)}]"


def _worst_group(decision: Decision, check: Check) -> str | None:
    """``worst_group umd organ=heart -0.2000 [-0.2000, -0.2000]``: the failed group test ``check`` reports, with
    its group as the comparison row names it; None when it cannot be found."""
    for g in decision.group_tests:
        if g.passed or g.unit != check.unit or not check.detail.startswith(g.key + ":"):
            continue
        rows = [r for comp in decision.comparisons for r in comp.rows if r.key == g.key and comp.unit == g.unit]
        group = f"{rows[0].dimension}={rows[0].group}" if rows and rows[0].dimension else g.key
        return f"worst_group {g.unit} {group} {_interval(g.delta, g.ci95_low, g.ci95_high)}"
    return None


def _headline(decision: Decision, check: Check) -> str | None:
    """``non_inferiority umd -0.0500 [-0.0800, -0.0200], margin 0.01``: the unit's headline delta; None when the
    decision holds no comparison of the unit."""
    comps = [c for c in decision.comparisons if c.unit == check.unit and c.rows]
    if not comps:
        return None
    head = comps[0].rows[0]
    policy = decision.gate_config.policies.get(check.unit)
    margin = "" if policy is None or check.name != "non_inferiority" else f", margin {policy.margin}"
    return f"{check.name} {check.unit} {_interval(head.delta, head.ci95_low, head.ci95_high)}{margin}"


def short_check(decision: Decision, check: Check) -> str:
    """One check of ``decision`` in one line with its numbers: ``worst_group umd organ=heart -0.2000 [-0.2000,
    -0.2000]``, ``non_inferiority umd -0.0500 [-0.0800, -0.0200], margin 0.01``, ``floor umd/dsc ci95_low 0.6630
    >= 0.5``; any other check its name, scope and detail (cut at :data:`SHORT_DETAIL` characters)."""
    text = None
    if check.name == "worst_group" and not check.passed:
        text = _worst_group(decision, check)
    elif check.name in ("non_inferiority", "superiority"):
        text = _headline(decision, check)
    elif check.name == "floor":
        text = f"floor {check.detail}"
    if text is None:
        detail = check.detail if len(check.detail) <= SHORT_DETAIL else check.detail[: SHORT_DETAIL - 3] + "..."
        text = f"{check.name} {check_scope(check.unit)}: {detail}"
    return text


def failed_checks(decision: Decision) -> list[str]:
    """:func:`short_check` of every failed check, in the decision's order."""
    return [short_check(decision, c) for c in decision.checks if not c.passed]


def gate_summary(decision: Decision) -> str:
    """The decision in a few words (the leaderboard's gate column): ``pass`` (a first version's: ``pass:`` and
    the floors it reached, ``pass: floor umd/dsc ci95_low 0.6630 >= 0.5``), or ``fail:`` and its first failed
    check (:func:`short_check`), followed by ``(+N more)`` when more failed."""
    failed = failed_checks(decision)
    if not failed:
        floors = [short_check(decision, c) for c in decision.checks if c.name == "floor"]
        return decision.verdict + (": " + "; ".join(floors) if decision.champion is None and floors else "")
    more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
    return f"{decision.verdict}: {failed[0]}{more}"
