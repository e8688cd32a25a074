"""MLflow tag names trackeval writes (``trackeval.*``) and the run kinds."""

TAG = "trackeval."
#: ``trackeval.kind`` of a model version's parent run, of one unit's evaluation run, of a gate decision run
KIND_PARENT, KIND_BENCHMARK, KIND_GATE = "evaluation", "benchmark", "gate_decision"
#: model-version tag holding trackeval's model version (``v2``), and the prefix of ``eval_run.<unit>`` tags
VERSION_TAG = TAG + "model_version"
EVAL_RUN_TAG = TAG + "eval_run."
#: evaluation-run tag: sha256 of the run's results.json artifact (the bytes ``track`` uploaded): its evidence digest
RESULTS_DIGEST_TAG = TAG + "results_digest"
#: decision-run tag set when the decision moved ``@champion`` to its candidate (``true``)
PROMOTED_TAG = TAG + "gate.promoted"
#: decision-run tag: the id of the key that signed its attestation, or ``unsigned``
SIGNATURE_TAG = TAG + "gate.signature"
