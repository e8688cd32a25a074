"""The gate wired once: the MLflow store, the ``gate`` config section and every registered unit's policy, built
from the configuration by :meth:`Gate.from_config` and used by ``promote``, ``compare``, ``verify``, the DVC
pipeline's gate stage and the Python API (:mod:`trackeval.api`).

:meth:`Gate.standing` is what makes the Python API's ``promote`` idempotent: the recorded decision behind a candidate
that is already ``@champion`` on the same evidence.

The policies are resolved on first use (:attr:`Gate.policies`), at the point each command has always resolved
them: ``verify`` and ``promote --explain`` never need them, and ``promote`` reads the registry (an unknown model
or version is reported first) before it resolves them.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from trackeval.config import EvalConfig, GateConfig
from trackeval.gate.compare import BenchmarkComparison
from trackeval.gate.decide import Decision
from trackeval.gate.policy import UnitPolicy, resolve_policies
from trackeval.registry import units
from trackeval.results import BenchmarkResult
from trackeval.tracking.client import Mlflow
from trackeval.tracking.decision_runs import read_decision
from trackeval.tracking.evidence import compare_refs
from trackeval.tracking.model_registry import registered_aliases, resolve_version
from trackeval.tracking.promotion import dry_run_decision, promote, reconcile
from trackeval.tracking.verification import AliasStatus, verify_aliases


@dataclass(frozen=True)
class Promotion:
    """What gating a candidate gave: the decision (None: a dry run found the candidate is the champion and has
    no ``@previous``), the alias it was gated against (``champion``; ``previous`` in that dry run), the
    candidate's version name and the decision run (None: a dry run records nothing)."""

    decision: Decision | None
    baseline: str
    label: str
    run_id: str | None = None


@dataclass(frozen=True)
class Gate:
    """The store (:class:`~trackeval.tracking.client.Mlflow`) and the ``gate`` section the gate decides with;
    :attr:`policies` are the registered units' under that section."""

    store: Mlflow
    config: GateConfig

    @classmethod
    def from_config(cls, cfg: EvalConfig) -> Gate:
        """The gate of ``cfg``: its ``tracking`` section's store (opened now) and its ``gate`` section."""
        return cls(Mlflow(cfg.tracking), cfg.gate)

    @functools.cached_property
    def policies(self) -> dict[str, UnitPolicy]:
        """``{unit: policy}`` of every registered unit under :attr:`config`, resolved on first use."""
        return resolve_policies(self.config, units().values())

    def compare(
        self, a: str, b: str
    ) -> tuple[list[BenchmarkComparison], list[tuple[BenchmarkResult, BenchmarkResult]]]:
        """``trackeval compare``: :func:`~trackeval.tracking.evidence.compare_refs` of ``a - b``."""
        return compare_refs(self.store, a, b, self.config, self.policies)

    def promote(self, model: str, candidate: str, *, dry_run: bool = False) -> Promotion:
        """``trackeval promote``: gate ``candidate`` against ``model@champion``, record the decision and move the
        aliases on pass (:func:`~trackeval.tracking.promotion.promote`); ``dry_run``: the decision that would be
        taken, nothing recorded or moved (:func:`~trackeval.tracking.promotion.dry_run_decision`)."""
        if dry_run:
            decision, baseline, label = dry_run_decision(self.store, model, candidate, self.config, self.policies)
            return Promotion(decision, baseline, label)
        decision, run_id = promote(self.store, model, candidate, self.config, self.policies)
        return Promotion(decision, "champion", decision.candidate, run_id)

    def standing(self, model: str, candidate: str, trusted: Mapping[str, Ed25519PublicKey]) -> Promotion | None:
        """The promotion that already made ``candidate`` ``model@champion``, when its decision still holds as
        ``verify`` checks it (:func:`~trackeval.tracking.verification.verify_aliases` with the ``trusted`` keys:
        the record agrees with itself, is signed by one of them when any is given, and the evidence of both sides
        is what their evaluation runs hold now): the recorded decision (its ``decision.json``) and its run. None
        when the candidate is not the champion, or the decision that made it so does not hold (``promote`` then
        refuses it, as before). Records and moves nothing.

        Raises:
            InputError: no such model or version (as ``promote`` would).
        """
        mv = resolve_version(self.store, model, candidate)
        if str(registered_aliases(self.store, model).get("champion")) != str(mv.version):
            return None
        statuses = {s.alias: s for s in verify_aliases(self.store, model, trusted)}
        held = statuses.get("champion")
        if held is None or held.version != str(mv.version) or held.problem or held.decision_run is None:
            return None
        _, decision = read_decision(self.store, held.decision_run)
        return Promotion(decision, "champion", decision.candidate, held.decision_run)

    def reconcile(self, model: str, versions: list[str]) -> tuple[list[tuple[str, Decision, str]], str | None]:
        """The pipeline's gate stage: :func:`~trackeval.tracking.promotion.reconcile` of ``versions``."""
        return reconcile(self.store, model, versions, self.config, self.policies)

    def verify(self, model: str, trusted: Mapping[str, Ed25519PublicKey]) -> list[AliasStatus]:
        """``trackeval verify``: :func:`~trackeval.tracking.verification.verify_aliases` of ``model``."""
        return verify_aliases(self.store, model, trusted)
