"""Missing predictions, said out loud: the one warning line every unit prints, the ``missing_prediction: error``
policy and the "no prediction matches any case" error, shared by every unit that reads predictions keyed by case.

* some cases without a prediction: one warning line, ``1/6 cases have no prediction: s02_pet`` (the first
  :data:`SHOWN_IDS` ids, then ``...``), logged and recorded in the result's ``warnings``;
* the same with the unit's ``missing_prediction`` policy at ``error``: an :class:`InputError` naming the first
  missing case and the prediction file expected for it;
* no case with a prediction at all (every file misnamed, a wrong folder): an :class:`InputError` naming the
  predictions folder or file and a few names it expected, never a table of zeros.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from trackeval.errors import InputError

#: the missing case ids named in the warning line (then ``...``)
SHOWN_IDS = 5
#: the expected names quoted in the "no prediction matches" error
SHOWN_NAMES = 3


def missing_note(missing: Sequence[str], n_cases: int) -> str:
    """``<n>/<total> cases have no prediction: <id>, <id>, ...`` (the first :data:`SHOWN_IDS` ids)."""
    ids = ", ".join(missing[:SHOWN_IDS]) + (", ..." if len(missing) > SHOWN_IDS else "")
    return f"{len(missing)}/{n_cases} cases have no prediction: {ids}"


def check_missing(
    case_ids: Sequence[str],
    missing: Sequence[str],
    *,
    predictions: Path,
    expected_name: Callable[[str], str],
    others: Sequence[str] = (),
    other_kind: str = "file",
    expected_kind: str = "names",
    accepted: str = "",
    found: str = "",
    policy: str = "worst",
    policy_field: str = "",
) -> list[str]:
    """The warning lines (``[]`` or ``[missing_note(...)]``) for ``missing`` among ``case_ids`` (both in case order).

    Args:
        case_ids: every case of the ground truth.
        missing: the cases without a prediction.
        predictions: the predictions folder (one file per case) or file (one entry per case).
        expected_name: the prediction file name (or entry id) a case is matched with.
        others: names found in ``predictions`` that match no case (quoted when nothing matches).
        other_kind: what ``others`` are, singular (``file``, ``row``).
        expected_kind: what ``expected_name`` gives, plural (``names``, ``ids``).
        accepted: what else is accepted, appended to the expected names (``" (or .nii)"``).
        found: what was found instead, when ``others`` cannot say it (``"5 row(s) of unselected regions"``).
        policy: the unit's missing-prediction policy; ``error`` makes any missing case an error.
        policy_field: the config key of that policy (``umd.missing_prediction``), named in the error.

    Raises:
        InputError: no case has a prediction (``file`` = ``predictions``), or the policy is ``error`` and a case
            has none (``file`` = the expected prediction, ``case`` = the first missing case, ``field`` = the
            policy's key).
    """
    if not missing:
        return []
    if case_ids and len(missing) == len(case_ids):
        expected = ", ".join(expected_name(c) for c in case_ids[:SHOWN_NAMES])
        if others:
            found = f"found {len(others)} other {other_kind}(s), e.g. {others[0]}"
        elif not found:
            found = f"found no other {other_kind}"
        raise InputError(
            f"no prediction in {predictions} matches a case: "
            f"expected {expected_kind} like {expected}{accepted} ({found})",
            file=str(predictions),
        )
    note = missing_note(missing, len(case_ids))
    if policy == "error":
        first = missing[0]
        expected_file = predictions / expected_name(first) if predictions.is_dir() else predictions
        raise InputError(
            f"{note} ({policy_field}: error); expected {expected_file}{accepted}",
            file=str(expected_file),
            case_id=first,
            field=policy_field or None,
        )
    return [note]
