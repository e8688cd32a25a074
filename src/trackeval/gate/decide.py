"""The promotion gate's decision rules: pure functions of two sets of results, a :class:`GateConfig` and the
units' policies (:mod:`trackeval.gate.policy`).

Per benchmark unit (primary metric; delta = the candidate's headline - the champion's headline, each as its own
results report it, paired on case ids; the bounds below are for a higher-is-better metric and mirror for a
lower-is-better one):

1. **Pairing**: same ground-truth digest, protocol config, case set and resampling unit, and headlines that
   their case records reproduce, else the gate fails with the reason. **Missing predictions**: a candidate
   with more cases without a prediction than the champion fails (under ``missing_prediction: exclude`` those
   cases would otherwise drop out of its headline).
2. **Non-inferiority**: lower bound of the 95% CI of the headline delta > ``-margin``, the CI from resampling
   clusters of cases jointly for both versions and recomputing both headlines
   (for AUROC: the DeLong Wald CI of the macro AUC difference, see :mod:`trackeval.gate.compare`).
   Every unit must pass (an intersection-union rule: no multiplicity adjustment is needed across
   benchmarks, because the gate passes only if all of them pass).
3. **Superiority** (optional per benchmark): lower bound > 0.
4. **Worst-group guard** over the breakdown groups (organ, region, finding, modality...):
   ``group_test="harm"``: for each group a one-sided paired-bootstrap test of ``delta_g < -margin_g``
   (a one-sided DeLong z-test for AUROC groups);
   p-values are adjusted over ALL groups of all units in this decision (Holm by default, or
   Bonferroni), and a group fails when its adjusted p <= alpha. ``group_test="noninferiority"``: every group
   must show ``delta_g > -margin_g`` at level alpha (intersection-union, unadjusted).
5. **Leakage audits**: a result whose ``summary`` has a non-zero ``audit/<check>`` (or ``*leak*``) count, or
   whose ``warnings`` mention leakage, fails.

A first version (no champion), and any unit the champion was never evaluated on, must instead reach the
unit's absolute floor on its primary metric (a ceiling for a lower-is-better metric), by default with the
conservative end of its CI.

Whatever the verdict, a unit whose headline interval is wider than twice its margin gets a note saying that
this many subjects (or cases) cannot resolve the margin at the observed spread, and about how many would.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from trackeval.config import GateConfig
from trackeval.gate import display
from trackeval.gate.compare import BenchmarkComparison, compare_results
from trackeval.gate.pairing import UNIT_AS_BENCHMARK, DeltaRow
from trackeval.gate.policy import Policy, PolicyRecord
from trackeval.results import BenchmarkResult
from trackeval.stats.paired import adjust_pvalues, bootstrap_pvalue, count_pvalue, normal_pvalue, resamples_for

if TYPE_CHECKING:
    import pandas as pd


class Check(BaseModel):
    """One rule applied to one benchmark unit (``*``: to all of them); ``detail`` says what was compared with what."""

    model_config = UNIT_AS_BENCHMARK

    name: Literal[
        "primary_metric",
        "pairing",
        "missing_predictions",
        "non_inferiority",
        "superiority",
        "worst_group",
        "audit",
        "floor",
    ]
    #: the benchmark unit (``umd``, ``xray/cls``) or ``*``; stored as ``benchmark``
    unit: str = Field(alias="benchmark")
    passed: bool
    detail: str


class GroupTest(BaseModel):
    """The worst-group guard for one breakdown group."""

    model_config = ConfigDict(extra="forbid")

    unit: str = ""
    key: str
    delta: float | None
    ci95_low: float | None
    ci95_high: float | None
    margin: float
    p_value: float
    p_adjusted: float
    passed: bool


class GateRecord(GateConfig):
    """The gate config a decision was made under, with the policy of each unit it judged (what a decision
    records as ``gate_config``): the config's fields, then ``policies``, as records (no corpus function: code is
    not recorded); :func:`~trackeval.tracking.decision_runs.explain` rebuilds the policies from them."""

    policies: dict[str, PolicyRecord] = Field(default_factory=dict)


class Decision(BaseModel):
    """The gate's verdict with everything needed to audit it."""

    model_config = ConfigDict(extra="forbid")

    model: str
    candidate: str
    champion: str | None
    verdict: Literal["pass", "fail"]
    checks: list[Check]
    comparisons: list[BenchmarkComparison]
    group_tests: list[GroupTest]
    gate_config: GateRecord
    #: what the data cannot tell at this sample size (never changes the verdict)
    notes: list[str] = Field(default_factory=list)
    #: the evidence the decision was made on: ``{unit: sha256 of the results.json}`` of each side's evaluation runs
    #: (filled in by the tracking layer; empty in a decision recorded before trackeval 0.3)
    candidate_evidence: dict[str, str] = Field(default_factory=dict)
    champion_evidence: dict[str, str] = Field(default_factory=dict)

    @property
    def reasons(self) -> list[str]:
        """Details of the failed checks (empty on pass)."""
        return [f"{c.unit}: {c.name}: {c.detail}" for c in self.checks if not c.passed]

    def to_frame(self) -> pd.DataFrame:
        """The rows of every comparison, unit by unit, as one pandas DataFrame
        (:meth:`BenchmarkComparison.to_frame`'s columns), with the worst-group guard's test of each group row
        (:data:`~trackeval.gate.display.GROUP_COLUMNS`: ``margin``, ``p_value``, ``p_adjusted`` as float64,
        ``passed``; NaN / None on the headline rows, whose checks are :attr:`checks`). Empty for a first
        version (floors only: no comparison). ``frame.attrs``: ``model``, ``candidate``, ``champion``,
        ``verdict`` and ``reasons``. Imports pandas on first use."""
        tests = {(g.unit, g.key): g for g in self.group_tests}
        rows = []
        for comp in self.comparisons:
            for row in comp.row_records():
                test = tests.get((comp.unit, str(row["key"])))
                rows.append({**row, **({c: getattr(test, c) for c in display.GROUP_COLUMNS} if test else {})})
        columns = (*display.ROW_COLUMNS, *display.GROUP_COLUMNS)
        out = display.frame(rows, columns, (*display.FLOAT_COLUMNS, "margin", "p_value", "p_adjusted"))
        out.attrs.update(
            model=self.model,
            candidate=self.candidate,
            champion=self.champion,
            verdict=self.verdict,
            reasons=self.reasons,
        )
        return out

    def _repr_html_(self) -> str:
        """The decision as an HTML fragment (Jupyter's rich display; every value escaped): verdict, checks,
        notes, worst-group tests and the comparisons."""
        heading = {"model": self.model, "candidate": self.candidate, "champion": self.champion}
        groups = [[g.key, g.delta, g.margin, g.p_value, g.p_adjusted, g.passed] for g in self.group_tests]
        return display.decision_html(
            {**heading, "verdict": self.verdict},
            [[c.name, c.unit, c.passed, c.detail] for c in self.checks],
            self.notes,
            groups,
            [c._repr_html_() for c in self.comparisons],
        )


def audit_problems(result: BenchmarkResult) -> list[str]:
    """Leakage-audit failures recorded in a result: non-zero ``summary`` counts ``audit/<check>`` (written by
    :mod:`trackeval.audit.leakage`) or named ``*leak*``, and warnings that mention leakage."""
    out = [
        f"summary.{k} = {v}"
        for k, v in sorted(result.summary.items())
        if (k.startswith("audit/") or "leak" in k) and v > 0
    ]
    out += [f"warning: {w}" for w in result.warnings if "leak" in w.lower()]
    return out


def _floor_check(result: BenchmarkResult, policy: Policy, cfg: GateConfig) -> Check:
    unit, key = policy.unit, policy.key
    if policy.floor is None:
        return Check(name="floor", unit=unit, passed=False, detail="no absolute floor configured (gate.floors)")
    s = result.aggregates.get(key)
    # the conservative end of the CI: its low bound, or its high bound for a lower-is-better metric
    bound = None if s is None else (s.ci95_low if policy.higher_is_better else s.ci95_high)
    stat = None if s is None else (s.value if cfg.floor_statistic == "value" else bound)
    op = ">=" if policy.higher_is_better else "<="
    ok = stat is not None and (stat >= policy.floor if policy.higher_is_better else stat <= policy.floor)
    shown = "missing" if stat is None else f"{stat:.4f}"
    return Check(name="floor", unit=unit, passed=ok, detail=f"{key} {cfg.floor_statistic} {shown} {op} {policy.floor}")


def _interval_checks(head: DeltaRow, policy: Policy) -> list[Check]:
    unit, margin = policy.unit, policy.margin
    lo, hi = head.ci95_low, head.ci95_high
    if lo is not None:
        shown = f"delta {head.delta:+.4f} [{lo:+.4f}, {hi:+.4f}]"
    elif head.delta is not None:
        shown = f"delta {head.delta:+.4f} without a CI (variance undefined, e.g. a finding with one positive)"
    else:
        shown = "no paired values"
    if policy.higher_is_better:
        ni, ni_need = lo is not None and lo > -margin, f"need lower bound > -{margin}"
        sup, sup_need = lo is not None and lo > 0, "need lower bound > 0"
    else:
        ni, ni_need = hi is not None and hi < margin, f"need upper bound < +{margin} (lower is better)"
        sup, sup_need = hi is not None and hi < 0, "need upper bound < 0 (lower is better)"
    checks = [Check(name="non_inferiority", unit=unit, passed=ni, detail=f"{head.key}: {shown}; {ni_need}")]
    if policy.superiority:
        checks.append(Check(name="superiority", unit=unit, passed=sup, detail=f"{head.key}: {shown}; {sup_need}"))
    return checks


def _pvalue(
    comp: BenchmarkComparison, row: DeltaRow, threshold: float, alternative: Literal["less", "greater"]
) -> float:
    """One-sided p-value of a group row: the DeLong test for AUROC rows (on the row's t reference, as its
    interval); else the bootstrap replicates' level,
    small-sample corrected as the row's interval is (so p <= alpha exactly when the one-sided bound excludes
    ``threshold``)."""
    if comp.method == "delong":
        delta = math.nan if row.delta is None else row.delta
        se = math.nan if row.std_error is None else row.std_error
        return normal_pvalue(delta, se, threshold, alternative, row.df if comp.reference == "t" else None)
    return bootstrap_pvalue(row.samples or [], threshold, alternative, row.expansion_units, comp.interval)


def _group_tests(
    comparisons: list[BenchmarkComparison], policies: Mapping[str, Policy], cfg: GateConfig
) -> list[GroupTest]:
    tagged = [(c, r) for c in comparisons for r in c.rows if r.dimension]
    rows = [r for _, r in tagged]
    margins = [policies[r.unit].group_margin(r.dimension, r.group) for r in rows]
    # harm: H1 "the group got worse by more than its margin"; noninferiority: H1 "it did not"
    harm = cfg.group_test == "harm"
    p = []
    for (comp, r), m in zip(tagged, margins, strict=True):
        higher = policies[r.unit].higher_is_better
        threshold = -m if higher else m
        worse: Literal["less", "greater"] = "less" if higher else "greater"
        better: Literal["less", "greater"] = "greater" if higher else "less"
        p.append(_pvalue(comp, r, threshold, worse if harm else better))
    if harm:
        adj = adjust_pvalues(p, cfg.multiplicity)
        passed = [a > cfg.alpha for a in adj]
    else:
        adj = p
        passed = [x <= cfg.alpha for x in p]
    return [
        GroupTest(
            unit=r.unit,
            key=r.key,
            delta=r.delta,
            ci95_low=r.ci95_low,
            ci95_high=r.ci95_high,
            margin=m,
            p_value=pv,
            p_adjusted=a,
            passed=ok,
        )
        for r, m, pv, a, ok in zip(rows, margins, p, adj, passed, strict=True)
    ]


#: the most resamples :func:`guard_resolution_note` suggests; beyond, it asks for more subjects
MAX_SUGGESTED_RESAMPLES = 1_000_000


def guard_resolution_note(comparisons: list[BenchmarkComparison], n_tests: int, cfg: GateConfig) -> str | None:
    """A note when the worst-group guard (``harm``) cannot refuse any group, however large its regression: every
    group's smallest attainable p-value (the resolution of ``gate.n_resamples`` bootstrap replicates, expanded
    for its clusters) is above the level the multiplicity rule's first step needs (``alpha / groups`` for Holm
    and Bonferroni). Says how many resamples would let one be refused. None when a group can be refused, or
    when a DeLong group (no resolution floor) is among them."""
    rows = [(c, r) for c in comparisons for r in c.rows if r.dimension]
    if cfg.group_test != "harm" or not rows or any(c.method == "delong" for c, _ in rows):
        return None
    level = cfg.alpha / (1 if cfg.multiplicity == "none" else n_tests)
    floors = [
        (count_pvalue(0, cfg.n_resamples, r.expansion_units, c.interval), r.expansion_units, c.interval)
        for c, r in rows
    ]
    p_min, n_units, interval = min(floors, key=lambda f: f[0])
    if p_min <= level:
        return None
    need = resamples_for(level, n_units, interval)
    remedy = f"gate.n_resamples >= {need} would let one be" if need <= MAX_SUGGESTED_RESAMPLES else "more subjects"
    return (
        f"worst-group guard: at {round(n_units, 2):g} clusters the smallest p-value {cfg.n_resamples} resamples can "
        f"give is {p_min:.4f}, above the {level:.4f} that {cfg.multiplicity} over {n_tests} groups needs: no group "
        f"can be refused, however large its regression ({remedy})"
    )


def compare_unit(
    cand: BenchmarkResult, base: BenchmarkResult, policy: Policy, cfg: GateConfig, labels: tuple[str, str]
) -> BenchmarkComparison:
    """The paired comparison the gate (and ``trackeval compare``) makes for one unit: its primary metric and
    group dimensions and declared facts, the gate's resamples, seed and confidence."""
    return compare_results(
        cand,
        base,
        policy,
        policy.group_dimensions,
        n_resamples=cfg.n_resamples,
        seed=cfg.seed,
        confidence=cfg.confidence,
        labels=labels,
        protocol=policy.protocol,
    )


def n_missing(result: BenchmarkResult) -> int:
    """Cases of ``result`` without a prediction (status ``missing_prediction``)."""
    return result.cases.field("status").count("missing_prediction")


def _missing_check(cand: BenchmarkResult, base: BenchmarkResult, unit: str) -> Check | None:
    """Fails when the candidate has more cases without a prediction than the champion; None when neither has any."""
    mc, mb = n_missing(cand), n_missing(base)
    if mc == 0 and mb == 0:
        return None
    detail = f"missing predictions: candidate {mc} vs champion {mb}"
    return Check(name="missing_predictions", unit=unit, passed=mc <= mb, detail=detail)


def resolution_note(head: DeltaRow, comp: BenchmarkComparison, policy: Policy) -> str | None:
    """``umd: 6 subjects cannot resolve margin 0.01 at the observed spread; about 40 would`` when the headline
    interval's half-width is at least the margin (a true delta of 0 could then not be shown non-inferior), else
    None. The projection scales the half-width by ``1/sqrt(n)``."""
    if head.ci95_low is None or head.ci95_high is None or policy.margin <= 0 or head.n_units < 1:
        return None
    half = (head.ci95_high - head.ci95_low) / 2.0
    if half < policy.margin:
        return None
    needed = math.ceil(head.n_units * (half / policy.margin) ** 2) + 1
    # "subjects" where a subject holds several cases (UMD's PET and CT), else the cases are the units
    what = "subjects" if comp.cluster == "subject_id" and head.n_units < comp.n_cases else "cases"
    return (
        f"{policy.unit}: {head.n_units} {what} cannot resolve margin {policy.margin} at the observed spread; "
        f"about {needed} would"
    )


def _unit_checks(
    unit: str,
    candidate: Mapping[str, BenchmarkResult],
    champion: Mapping[str, BenchmarkResult],
    policy: Policy | None,
    cfg: GateConfig,
    labels: tuple[str, str],
) -> tuple[list[Check], BenchmarkComparison | None, str | None]:
    """The checks of one unit (module docstring: rules 1-3 and 5, or the floor), its comparison (None: no
    champion result or no policy) and its resolution note (None: the margin is resolved, or nothing compared)."""
    if policy is None:
        detail = "not a registered benchmark unit: no primary metric (is its plug-in installed?)"
        return [Check(name="primary_metric", unit=unit, passed=False, detail=detail)], None, None
    if unit not in candidate:
        detail = f"the champion was evaluated on {unit} but the candidate was not"
        return [Check(name="pairing", unit=unit, passed=False, detail=detail)], None, None
    result = candidate[unit]
    checks = []
    if cfg.require_audits:
        problems = audit_problems(result)
        checks.append(Check(name="audit", unit=unit, passed=not problems, detail="; ".join(problems) or "clean"))
    if unit not in champion:
        return [*checks, _floor_check(result, policy, cfg)], None, None
    comp = compare_unit(result, champion[unit], policy, cfg, labels)
    if comp.problems:
        return [*checks, Check(name="pairing", unit=unit, passed=False, detail="; ".join(comp.problems))], comp, None
    missing = _missing_check(result, champion[unit], unit)
    if missing is not None:
        checks.append(missing)
    checks.extend(_interval_checks(comp.rows[0], policy))
    return checks, comp, resolution_note(comp.rows[0], comp, policy)


def _group_checks(groups: list[GroupTest], cfg: GateConfig) -> list[Check]:
    """A failed ``worst_group`` check per failed group test, or one passed check (unit ``*``) when every group
    passed; none without groups."""
    checks = []
    for g in groups:
        if not g.passed:
            delta = "n/a" if g.delta is None else f"{g.delta:+.4f} [{g.ci95_low:+.4f}, {g.ci95_high:+.4f}]"
            detail = (
                f"{g.key}: delta {delta} vs margin -{g.margin}; "
                f"p={g.p_value:.4f}, adjusted ({cfg.multiplicity}) {g.p_adjusted:.4f}"
            )
            checks.append(Check(name="worst_group", unit=g.unit, passed=False, detail=detail))
    if groups and all(g.passed for g in groups):
        detail = f"{len(groups)} group(s) within their margins ({cfg.group_test}, {cfg.multiplicity})"
        checks.append(Check(name="worst_group", unit="*", passed=True, detail=detail))
    return checks


def decide(
    model: str,
    candidate_version: str,
    candidate: Mapping[str, BenchmarkResult],
    champion_version: str | None,
    champion: Mapping[str, BenchmarkResult] | None,
    cfg: GateConfig,
    policies: Mapping[str, Policy],
) -> Decision:
    """Apply the gate (module docstring) to the candidate's and champion's results, keyed by unit name.

    ``champion=None`` means no champion exists yet: only audits and absolute floors apply. ``policies``: the
    rules per unit (:func:`trackeval.gate.policy.resolve_policies`); a result of an unknown unit fails. The
    decision records ``cfg`` and the policies of the units either side was evaluated on (:class:`GateRecord`).
    """
    checks: list[Check] = []
    comparisons: list[BenchmarkComparison] = []
    notes: list[str] = []
    champion = champion or {}
    if not candidate:
        checks.append(Check(name="pairing", unit="*", passed=False, detail="the candidate has no evaluations"))
    labels = (candidate_version, champion_version or "")
    for unit in sorted(set(candidate) | set(champion)):
        unit_checks, comp, note = _unit_checks(unit, candidate, champion, policies.get(unit), cfg, labels)
        checks += unit_checks
        comparisons += [comp] if comp is not None else []
        notes += [note] if note else []
    groups = _group_tests(comparisons, policies, cfg)
    checks += _group_checks(groups, cfg)
    guard = guard_resolution_note(comparisons, len(groups), cfg)
    notes += [guard] if guard else []
    judged = {u: p.record() for u, p in sorted(policies.items()) if u in candidate or u in champion}
    return Decision(
        model=model,
        candidate=candidate_version,
        champion=champion_version,
        verdict="pass" if checks and all(c.passed for c in checks) else "fail",
        checks=checks,
        comparisons=comparisons,
        group_tests=groups,
        notes=notes,
        gate_config=GateRecord(**{f: getattr(cfg, f) for f in GateConfig.model_fields}, policies=judged),
    )
