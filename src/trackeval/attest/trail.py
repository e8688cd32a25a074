"""The audit trail of a model's gate decisions as data (``trackeval history --json``, schema :data:`SCHEMA`): built
from the MLflow store by :mod:`trackeval.tracking.history`, rendered by :mod:`trackeval.report.history`. A
documented contract (docs/gate.md): fields are added, never renamed, within a schema version.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: the ``schema`` of :class:`History`
SCHEMA = "trackeval.history/1"


class HistoryCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    unit: str
    passed: bool
    detail: str


class HistoryEvent(BaseModel):
    """One event: a gate decision (``kind="decision"``) or an evaluation replaced by ``track --replace``
    (``kind="replaced"``)."""

    model_config = ConfigDict(extra="forbid")

    time: str
    kind: Literal["decision", "replaced"]
    #: registry version and trackeval version name (``v2``) of the candidate, or of the replaced evaluation
    version: str
    label: str
    #: the champion it was gated against (registry version, name), None for a first version
    champion: str | None = None
    champion_label: str | None = None
    verdict: Literal["pass", "fail"] | None = None
    #: the decision moved ``@champion`` to its candidate
    promoted: bool = False
    aliases_before: dict[str, str] = Field(default_factory=dict)
    aliases_after: dict[str, str] = Field(default_factory=dict)
    checks: list[HistoryCheck] = Field(default_factory=list)
    #: ``verified`` (signed by the trusted key ``signer``), ``unsigned`` (no attestation), ``not checked`` (an
    #: attestation, no trusted key given), ``invalid`` (it does not verify, or names another run or record)
    signature: Literal["verified", "unsigned", "not checked", "invalid"] | None = None
    signer: str | None = None
    candidate_evidence: dict[str, str] = Field(default_factory=dict)
    champion_evidence: dict[str, str] = Field(default_factory=dict)
    #: the decision run (or the replaced evaluation run) and the run that replaced it
    run_id: str
    run_url: str | None = None
    replaced_by: str | None = None
    unit: str | None = None
    #: why the record cannot be trusted as it stands: its tags, metric or params disagree with its decision.json,
    #: or its attestation is invalid (None: it is consistent)
    problem: str | None = None


class History(BaseModel):
    """``trackeval history --json``: the events oldest first, the key ids trusted, the registry's aliases now and
    whether the alias moves derived from the decisions end where the registry is."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    schema_: Literal["trackeval.history/1"] = Field(SCHEMA, alias="schema")
    model: str
    trusted_keys: list[str]
    aliases_now: dict[str, str]
    trail_matches_registry: bool
    events: list[HistoryEvent]
