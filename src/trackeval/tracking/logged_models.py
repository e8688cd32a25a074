"""MLflow 3 LoggedModels of trackeval model versions: one per ``NAME`` / ``VERSION``, tagged with both, the
source of the version's registered model version (:mod:`trackeval.tracking.model_registry`).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from trackeval.io.redact import logger
from trackeval.tracking.client import Mlflow, quote
from trackeval.tracking.tags import TAG

log = logger(__name__)


def _logged_model_filter(name: str, version: str) -> str:
    return f"tags.`{TAG}model_name` = {quote(name)} AND tags.`{TAG}model_version` = {quote(version)}"


def _logged_models(ml: Mlflow, name: str, version: str) -> list[Any]:
    """LoggedModels of trackeval model version ``name``/``version``, oldest first."""
    found = ml.call(
        "search_logged_models",
        ml.client.search_logged_models,
        [ml.experiment_id()],
        filter_string=_logged_model_filter(name, version),
    )
    return sorted(found, key=lambda m: (m.creation_timestamp, m.model_id))


def find_logged_model(ml: Mlflow, name: str, version: str) -> Any | None:
    """The MLflow 3 LoggedModel of trackeval model version ``name``/``version`` in the experiment (or None); the
    oldest one if two processes created it at the same time."""
    found = _logged_models(ml, name, version)
    return found[0] if found else None


#: characters MLflow refuses in a LoggedModel's display name (its identity is in its tags)
_LOGGED_MODEL_NAME_FORBIDDEN = re.compile(r"[/:.%\"']")


def logged_model(ml: Mlflow, name: str, version: str, source_run_id: str, artifacts: Path | None = None) -> str:
    """The ``model_id`` of version ``name``/``version``'s LoggedModel, created once.

    With ``artifacts`` (a folder: the trained model's files, as the pipeline's train stage writes them) they
    become the model's artifacts; without, it is an external model (weights kept elsewhere) that records the
    name, version and source run. Either way an ``MLmodel`` file is written so the model can be registered as
    ``models:/<model_id>``. Evaluation metrics are linked to it with their dataset (see ``tracking.track``), so
    the experiment's Models tab and ``search_logged_models`` rank versions by benchmark.

    Re-runnable: a LoggedModel left PENDING by an interrupted process gets its files again and is finalized
    (an external one always; one with files when ``artifacts`` is given). Create, then deduplicate: of two
    created at the same time (a server store) the older is kept and the other deleted.
    """
    existing = find_logged_model(ml, name, version)
    if existing is not None:
        if str(existing.status) != "READY" and (artifacts is not None or _is_external(existing)):
            log.warning("LoggedModel %s of %s/%s was left %s by an interrupted run; finishing it",
                        existing.model_id, name, version, existing.status)  # fmt: skip
            _finish_logged_model(ml, existing, artifacts)
        return str(existing.model_id)
    tags = {TAG + "model_name": name, TAG + "model_version": version}
    if artifacts is None:
        tags["mlflow.model.isExternal"] = "true"
    model = ml.call(
        "create_logged_model",
        ml.client.create_logged_model,
        ml.experiment_id(),
        name=_LOGGED_MODEL_NAME_FORBIDDEN.sub("_", f"{name}-{version}"),
        source_run_id=source_run_id,
        tags=tags,
        model_type="trackeval",
    )
    _finish_logged_model(ml, model, artifacts)
    winner = find_logged_model(ml, name, version)
    if winner is not None and winner.model_id != model.model_id:
        ml.call("delete_logged_model", ml.client.delete_logged_model, model.model_id)
        return str(winner.model_id)
    return str(model.model_id)


def _is_external(model: Any) -> bool:
    return model.tags.get("mlflow.model.isExternal") == "true"


def _finish_logged_model(ml: Mlflow, model: Any, artifacts: Path | None) -> None:
    """Upload ``artifacts`` (if any) and the ``MLmodel`` file of ``model``, then mark it READY (re-runnable)."""
    from mlflow.entities import LoggedModelStatus
    from mlflow.models.utils import get_external_mlflow_model_spec

    with tempfile.TemporaryDirectory(prefix="trackeval-model-") as tmp:
        if artifacts is not None:
            shutil.copytree(artifacts, tmp, dirs_exist_ok=True)
        get_external_mlflow_model_spec(model).save(str(Path(tmp) / "MLmodel"))
        ml.call("log_model_artifacts", ml.client.log_model_artifacts, model.model_id, tmp)
    ml.call("finalize_logged_model", ml.client.finalize_logged_model, model.model_id, LoggedModelStatus.READY)
