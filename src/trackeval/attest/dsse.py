"""DSSE envelopes (Dead Simple Signing Envelope v1): a payload, its type, and signatures over the
pre-authentication encoding (:func:`pae`) of both, never over the raw payload.

``{"payloadType": ..., "payload": <base64>, "signatures": [{"keyid": ..., "sig": <base64>}]}``; an envelope
verifies when one of its signatures verifies under a trusted key (the key named by ``keyid`` first, then every
trusted key: ``keyid`` is a hint, not trusted).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trackeval.attest.keys import Signer

#: the payload type of an in-toto Statement
IN_TOTO = "application/vnd.in-toto+json"
#: the largest envelope read (a decision's attestation is a few KB; its predicate holds every check)
MAX_ENVELOPE_BYTES = 8 * 1024 * 1024


class AttestationError(Exception):
    """An envelope that does not verify, or whose statement is not what it must be; the message says why."""


class Signature(BaseModel):
    model_config = ConfigDict(extra="forbid")

    keyid: str = ""
    sig: str


class Envelope(BaseModel):
    """A DSSE envelope as stored (``attestation.dsse.json``)."""

    model_config = ConfigDict(extra="forbid")

    payloadType: str  # noqa: N815 - DSSE's field name
    payload: str
    signatures: list[Signature] = Field(min_length=1)

    def body(self) -> bytes:
        """The decoded payload. Raises :class:`AttestationError` when it is not base64."""
        return _b64decode(self.payload, "payload")


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE's pre-authentication encoding: ``DSSEv1 SP LEN(type) SP type SP LEN(body) SP body`` (LEN: decimal
    byte length)."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body)


def sign(body: bytes, payload_type: str, signer: Signer) -> Envelope:
    """An envelope of ``body`` with one Ed25519 signature by ``signer`` over :func:`pae`."""
    sig = signer.sign(pae(payload_type, body))
    return Envelope(
        payloadType=payload_type,
        payload=base64.b64encode(body).decode("ascii"),
        signatures=[Signature(keyid=signer.keyid, sig=base64.b64encode(sig).decode("ascii"))],
    )


def parse(raw: bytes) -> Envelope:
    """The envelope in ``raw`` (JSON). Raises :class:`AttestationError` when it is not one."""
    if len(raw) > MAX_ENVELOPE_BYTES:
        raise AttestationError(f"larger than {MAX_ENVELOPE_BYTES} bytes: not a trackeval attestation")
    try:
        return Envelope.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "envelope"
        raise AttestationError(f"not a DSSE envelope: {where}: {first['msg']}") from None


def verify(envelope: Envelope, trusted: Mapping[str, Ed25519PublicKey]) -> tuple[str, bytes]:
    """``(key id, payload)`` of the first signature that verifies under a trusted key.

    Raises :class:`AttestationError` when no signature does (naming the key ids it carries), or when there is no
    trusted key to check with.
    """
    if not trusted:
        raise AttestationError("no trusted public key to verify with (gate.trusted_keys, --trusted-key)")
    body = envelope.body()
    message = pae(envelope.payloadType, body)
    for signature in envelope.signatures:
        sig = _b64decode(signature.sig, "signatures.sig")
        order = [signature.keyid] if signature.keyid in trusted else []
        for kid in order + [k for k in trusted if k != signature.keyid]:
            try:
                trusted[kid].verify(sig, message)
            except InvalidSignature:
                continue
            return kid, body
    ids = ", ".join(short(s.keyid) if s.keyid else "(no keyid)" for s in envelope.signatures)
    raise AttestationError(f"no signature verifies under a trusted key (signed by {ids})")


def statement_of(envelope: Envelope, body: bytes) -> dict:
    """The JSON object in a verified ``body``. Raises :class:`AttestationError` when the payload is not an in-toto
    Statement's JSON object."""
    if envelope.payloadType != IN_TOTO:
        raise AttestationError(f"payloadType is {envelope.payloadType!r}, not {IN_TOTO!r}")
    try:
        statement = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise AttestationError(f"payload is not JSON: {exc}") from None
    if not isinstance(statement, dict):
        raise AttestationError("payload is not a JSON object")
    return statement


def short(keyid: str) -> str:
    """The first 16 hex digits of a key id (as printed)."""
    return keyid[:16]


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise AttestationError(f"{what} is not base64") from None
