"""The authorizer's decisions (Kafka's StandardAuthorizer rules) over principals, hosts and
patterns, and its durable store."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamkit.broker.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclError,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    check_binding,
)
from streamkit.broker.security.authorizer import Authorizer, authorizer_enabled

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
ALICE, BOB = "User:alice", "User:bob"


def acl(name: str, op: Operation, perm: Permission = ALLOW, principal: str = ALICE, host: str = "*",
        pattern: PatternType = LIT, rtype: ResourceType = TOPIC) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authz(*bindings: AclBinding, **kw: object) -> Authorizer:
    a = Authorizer(None, **kw)  # type: ignore[arg-type]
    a.add(bindings)
    return a


def test_kafka_class_names_enable_it() -> None:
    assert authorizer_enabled("org.apache.kafka.metadata.authorizer.StandardAuthorizer")
    assert authorizer_enabled("kafka.security.authorizer.AclAuthorizer")
    assert not authorizer_enabled("")


def test_nothing_is_allowed_without_an_acl_unless_allow_everyone() -> None:
    assert not authz().authorize(ALICE, "1.2.3.4", Operation.READ, TOPIC, "t")
    assert authz(allow_everyone_if_no_acl_found=True).authorize(ALICE, "h", Operation.READ, TOPIC, "t")
    # an ACL on the topic for someone else: allow.everyone no longer applies to it
    a = authz(acl("t", Operation.READ, principal=BOB), allow_everyone_if_no_acl_found=True)
    assert not a.authorize(ALICE, "h", Operation.READ, TOPIC, "t")
    assert a.authorize(ALICE, "h", Operation.READ, TOPIC, "other")


def test_super_users_bypass_every_acl() -> None:
    a = authz(acl("t", Operation.ALL, DENY, principal="User:admin"), super_users="User:admin;User:ops")
    assert a.authorize("User:admin", "h", Operation.WRITE, TOPIC, "t")
    assert a.authorize("User:ops", "h", Operation.ALTER, CLUSTER, "kafka-cluster")
    assert not a.authorize(ALICE, "h", Operation.WRITE, TOPIC, "t")


def test_literal_prefixed_and_wildcard_patterns() -> None:
    a = authz(acl("orders", Operation.READ), acl("pay-", Operation.WRITE, pattern=PRE),
              acl("*", Operation.DESCRIBE, principal=BOB))
    assert a.authorize(ALICE, "h", Operation.READ, TOPIC, "orders")
    assert not a.authorize(ALICE, "h", Operation.READ, TOPIC, "orders2")
    assert a.authorize(ALICE, "h", Operation.WRITE, TOPIC, "pay-eu")
    assert not a.authorize(ALICE, "h", Operation.WRITE, TOPIC, "pa")
    assert a.authorize(BOB, "h", Operation.DESCRIBE, TOPIC, "anything")
    assert not a.authorize(BOB, "h", Operation.READ, TOPIC, "anything")
    assert not a.authorize(ALICE, "h", Operation.READ, GROUP, "orders")  # another resource type


def test_implied_operations_and_all() -> None:
    a = authz(acl("r", Operation.READ), acl("w", Operation.WRITE), acl("c", Operation.ALTER_CONFIGS),
              acl("x", Operation.ALL))
    assert a.authorize(ALICE, "h", Operation.DESCRIBE, TOPIC, "r")
    assert a.authorize(ALICE, "h", Operation.DESCRIBE, TOPIC, "w")
    assert not a.authorize(ALICE, "h", Operation.READ, TOPIC, "w")  # WRITE does not imply READ
    assert a.authorize(ALICE, "h", Operation.DESCRIBE_CONFIGS, TOPIC, "c")
    assert not a.authorize(ALICE, "h", Operation.DESCRIBE, TOPIC, "c")
    assert a.authorize(ALICE, "h", Operation.DELETE, TOPIC, "x")


def test_deny_wins_and_denies_only_its_operation() -> None:
    a = authz(acl("t", Operation.ALL), acl("t", Operation.WRITE, DENY), acl("p", Operation.READ, pattern=PRE),
              acl("p-secret", Operation.READ, DENY))
    assert not a.authorize(ALICE, "h", Operation.WRITE, TOPIC, "t")
    assert a.authorize(ALICE, "h", Operation.READ, TOPIC, "t")
    assert a.authorize(ALICE, "h", Operation.DESCRIBE, TOPIC, "t")
    assert a.authorize(ALICE, "h", Operation.READ, TOPIC, "p-public")
    assert not a.authorize(ALICE, "h", Operation.READ, TOPIC, "p-secret")
    # a DENY of READ leaves DESCRIBE (implied by the prefixed READ) allowed, as in Kafka
    assert a.authorize(ALICE, "h", Operation.DESCRIBE, TOPIC, "p-secret")


def test_principal_wildcard_and_hosts() -> None:
    a = authz(acl("t", Operation.READ, principal="User:*"), acl("t", Operation.READ, DENY, host="10.0.0.9"))
    assert a.authorize(BOB, "127.0.0.1", Operation.READ, TOPIC, "t")
    assert not a.authorize(ALICE, "10.0.0.9", Operation.READ, TOPIC, "t")
    b = authz(acl("t", Operation.READ, host="127.0.0.1"))
    assert b.authorize(ALICE, "127.0.0.1", Operation.READ, TOPIC, "t")
    assert not b.authorize(ALICE, "127.0.0.2", Operation.READ, TOPIC, "t")


def test_write_on_any_topic_for_idempotent_producers() -> None:
    assert authz(acl("pre-", Operation.WRITE, pattern=PRE)).authorize_any(ALICE, "h", Operation.WRITE, TOPIC)
    assert not authz(acl("t", Operation.READ)).authorize_any(ALICE, "h", Operation.WRITE, TOPIC)
    # a DENY covering what the ALLOW selects leaves nothing
    denied = authz(acl("t", Operation.WRITE), acl("*", Operation.WRITE, DENY))
    assert not denied.authorize_any(ALICE, "h", Operation.WRITE, TOPIC)


def test_authorized_operations_bits() -> None:
    bits = authz(acl("t", Operation.READ)).authorized_operations(ALICE, "h", TOPIC, "t")
    assert bits == (1 << Operation.READ) | (1 << Operation.DESCRIBE)


def test_filters_as_describe_and_delete_acls_use_them() -> None:
    bindings = [acl("orders", Operation.READ), acl("ord", Operation.WRITE, pattern=PRE),
                acl("*", Operation.DESCRIBE, principal=BOB), acl("g", Operation.READ, rtype=GROUP)]
    a = authz(*bindings)
    assert a.describe(AclBindingFilter()) == bindings
    assert a.describe(AclBindingFilter(TOPIC, "orders", PatternType.MATCH)) == bindings[:3]
    assert a.describe(AclBindingFilter(TOPIC, "orders", PatternType.LITERAL)) == bindings[:1]
    assert a.describe(AclBindingFilter(TOPIC, "ord", PatternType.ANY)) == bindings[1:2]
    assert a.describe(AclBindingFilter(principal=BOB)) == bindings[2:3]
    assert a.describe(AclBindingFilter(operation=Operation.READ, permission=ALLOW)) == [bindings[0], bindings[3]]
    removed = a.delete([AclBindingFilter(ResourceType.GROUP), AclBindingFilter(principal=BOB)])
    assert removed == [[bindings[3]], [bindings[2]]]
    assert a.bindings == bindings[:2]


def test_bindings_are_durable(tmp_path: Path) -> None:
    a = Authorizer(tmp_path)
    a.add([acl("t", Operation.READ), acl("g-", Operation.ALL, DENY, pattern=PRE, rtype=GROUP)])
    a.delete([AclBindingFilter(TOPIC)])
    again = Authorizer(tmp_path)
    again.load()
    assert again.bindings == [acl("g-", Operation.ALL, DENY, pattern=PRE, rtype=GROUP)]


@pytest.mark.parametrize("binding", [
    acl("t", Operation.ANY), acl("t", Operation.READ, Permission.ANY), acl("t", Operation.READ, principal="alice"),
    acl("other", Operation.ALTER, rtype=CLUSTER), acl("*", Operation.READ, pattern=PRE),
    acl("t", Operation.CLUSTER_ACTION), AclBinding(ResourceType.ANY, "t", LIT, ALICE, "*", Operation.READ, ALLOW),
    AclBinding(TOPIC, "t", PatternType.MATCH, ALICE, "*", Operation.READ, ALLOW),
])
def test_bindings_kafka_refuses(binding: AclBinding) -> None:
    with pytest.raises(AclError):
        check_binding(binding)
