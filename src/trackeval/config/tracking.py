"""Tracking (MLflow) configuration: the ``tracking`` section of params.yaml."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from trackeval.config.base import FiniteFloat, PositiveInt, Section


class TrackingConfig(Section):
    """Where and how results are logged to MLflow.

    ``uri``: tracking (and registry) URI; ``MLFLOW_TRACKING_URI`` in the environment overrides it. The default
    is the embedded SQLite store ``sqlite:///mlflow.db`` (relative to the working directory).
    ``artifact_location``: local folder for artifacts of a new experiment on a non-HTTP store (a server
    chooses its own). ``experiment``: experiment name. ``retries``: extra attempts per MLflow call after a
    transient failure (server unreachable, 5xx, database locked), waiting ``backoff_s * 2**attempt`` seconds
    in between; ``http_timeout_s``: per-request timeout (s) against a server (MLflow's own retries are off,
    so the total wait stays bounded). ``lock_timeout_s``: how long ``track`` waits for the lock beside a local
    (SQLite or file) store held by another ``track`` before giving up with an error. ``dvc_root``: folder searched
    for ``data.dvc`` / ``dvc.lock``.
    """

    uri: str = "sqlite:///mlflow.db"
    artifact_location: str = "mlartifacts"
    experiment: str = "trackeval"
    retries: Annotated[int, Field(ge=0, le=10)] = 3
    backoff_s: Annotated[FiniteFloat, Field(ge=0.0)] = 0.5
    http_timeout_s: PositiveInt = 10
    lock_timeout_s: Annotated[FiniteFloat, Field(gt=0.0)] = 600.0
    dvc_root: str = "."
