"""Signed gate decisions: Ed25519 keys (:mod:`.keys`), DSSE envelopes (:mod:`.dsse`) and the in-toto Statement
whose predicate is one gate decision (:mod:`.statement`).

A decision signed with the gate's private key can be verified later by anyone holding the public key, without
trusting the MLflow store that holds it (docs/gate.md, "Signed decisions"). Nothing here talks to MLflow.
"""
