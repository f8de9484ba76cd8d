"""The Schema Registry's errors as Confluent's REST API reports them: an HTTP status and an
``error_code`` of its own (40401 subject not found, 42201 invalid schema, ...), so clients
that branch on the code (confluent-kafka's ``SchemaRegistryError.error_code``) work."""

from __future__ import annotations

__all__ = [
    "BAD_REQUEST",
    "FORWARDING_ERROR",
    "INCOMPATIBLE_SCHEMA",
    "INVALID_COMPATIBILITY_LEVEL",
    "INVALID_MODE",
    "INVALID_SCHEMA",
    "INVALID_VERSION",
    "OPERATION_NOT_PERMITTED",
    "REFERENCE_EXISTS",
    "SCHEMA_NOT_FOUND",
    "STORE_ERROR",
    "SUBJECT_CONFIG_NOT_FOUND",
    "SUBJECT_MODE_NOT_FOUND",
    "SUBJECT_NOT_FOUND",
    "SUBJECT_NOT_SOFT_DELETED",
    "SUBJECT_SOFT_DELETED",
    "TIMEOUT",
    "VERSION_NOT_FOUND",
    "VERSION_NOT_SOFT_DELETED",
    "VERSION_SOFT_DELETED",
    "RegistryError",
]

SUBJECT_NOT_FOUND = (404, 40401)
VERSION_NOT_FOUND = (404, 40402)
SCHEMA_NOT_FOUND = (404, 40403)
SUBJECT_SOFT_DELETED = (404, 40404)
SUBJECT_NOT_SOFT_DELETED = (404, 40405)
VERSION_SOFT_DELETED = (404, 40406)
VERSION_NOT_SOFT_DELETED = (404, 40407)
SUBJECT_CONFIG_NOT_FOUND = (404, 40408)
SUBJECT_MODE_NOT_FOUND = (404, 40409)
INCOMPATIBLE_SCHEMA = (409, 409)
INVALID_SCHEMA = (422, 42201)
INVALID_VERSION = (422, 42202)
INVALID_COMPATIBILITY_LEVEL = (422, 42203)
INVALID_MODE = (422, 42204)
OPERATION_NOT_PERMITTED = (422, 42205)
REFERENCE_EXISTS = (422, 42206)
BAD_REQUEST = (400, 400)
STORE_ERROR = (500, 50001)
TIMEOUT = (500, 50002)
FORWARDING_ERROR = (500, 50003)


class RegistryError(Exception):
    """A request the registry refuses: ``status`` is the HTTP status, ``code`` Confluent's
    ``error_code``."""

    def __init__(self, kind: tuple[int, int], message: str) -> None:
        super().__init__(message)
        self.status, self.code = kind
        self.message = message
