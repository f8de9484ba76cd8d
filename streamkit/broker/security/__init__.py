"""Broker security. Listener security: TLS from PEM files, SASL (PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512, OAUTHBEARER) and the principal each connection authenticates as; the request
handlers see only the principal (``ClientInfo.principal``), never how it was authenticated.
Authorization (Kafka's ACLs) and client quotas: pure decisions over durable stores; the
request handlers ask them through ``streamkit.broker.security.enforce``."""

from streamkit.broker.security.acl import (
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from streamkit.broker.security.authorizer import Authorizer

__all__ = ["AclBinding", "AclBindingFilter", "Authorizer", "Operation", "PatternType", "Permission", "ResourceType"]
