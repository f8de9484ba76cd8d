"""ACLs end to end: a real broker process with Kafka's StandardAuthorizer settings, managed
through confluent-kafka's AdminClient (CreateAcls, DescribeAcls, DeleteAcls), enforced on
what real clients do.

Until listeners authenticate, every connection is ``User:ANONYMOUS``: the tests grant and
deny that principal (and others, which then do not match it), with
``allow.everyone.if.no.acl.found=true`` so that resources without ACLs stay usable.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from streamkit.testing import BrokerProcess

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
BROKER_SETTINGS = {"authorizer.class.name": STANDARD, "allow.everyone.if.no.acl.found": "true"}
ANON = "User:ANONYMOUS"
LIT, PRE = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": broker.bootstrap})


def _acl(rtype: ResourceType, name: str, op: AclOperation, perm: AclPermissionType = ALLOW,
         principal: str = ANON, pattern: ResourcePatternType = LIT, host: str = "*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def _create(admin: AdminClient, *acls: AclBinding) -> None:
    for future in admin.create_acls(list(acls), request_timeout=10).values():
        future.result()


def _topic(admin: AdminClient, name: str, partitions: int = 1) -> None:
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)


def _produce_error(bootstrap: str, topic: str, **conf: object) -> KafkaError | None:
    errors: list[KafkaError | None] = []
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 5000, **conf})
    p.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
    p.flush(10)
    assert errors, "no delivery report"
    return errors[0]


def _consume_error(bootstrap: str, topic: str, group: str, **conf: object) -> KafkaError:
    settings: dict[str, object] = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                                   **conf}
    if "group.protocol" not in conf:
        settings["session.timeout.ms"] = 6000
    c = Consumer(settings)
    try:
        c.subscribe([topic])
        for _ in range(50):
            msg = c.poll(0.2)
            if msg is not None and msg.error() is not None:
                return msg.error()
        raise AssertionError("the consumer saw no error")
    finally:
        c.close()


def test_acls_are_created_described_and_deleted(admin: AdminClient) -> None:
    topic = _name("described")
    wanted = [_acl(ResourceType.TOPIC, topic, AclOperation.READ, principal="User:alice"),
              _acl(ResourceType.TOPIC, topic[:6], AclOperation.WRITE, DENY, principal="User:bob", pattern=PRE,
                   host="10.1.2.3"),
              _acl(ResourceType.GROUP, topic, AclOperation.ALL, principal="User:alice")]
    _create(admin, *wanted)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    assert set(wanted) <= set(admin.describe_acls(everything).result(10))
    # MATCH: what applies to the topic, the prefixed one included, the group's not
    match = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert set(admin.describe_acls(match).result(10)) == set(wanted[:2])
    by_bob = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None,
                              AclOperation.ANY, AclPermissionType.ANY)
    deleted = admin.delete_acls([by_bob])[by_bob].result(10)
    assert deleted == [wanted[1]]
    assert set(admin.describe_acls(match).result(10)) == {wanted[0]}


def test_a_bad_acl_is_refused_with_invalid_request(admin: AdminClient) -> None:
    # confluent-kafka names the CLUSTER resource type (4) BROKER
    bad = _acl(ResourceType.BROKER, "not-the-cluster", AclOperation.ALTER)
    with pytest.raises(KafkaException) as info:
        _create(admin, bad)
    assert info.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert "kafka-cluster" in info.value.args[0].str()


def test_a_denied_topic_refuses_produce_and_fetch_and_others_still_work(broker: BrokerProcess,
                                                                        admin: AdminClient) -> None:
    locked, open_topic = _name("locked"), _name("open")
    _topic(admin, locked)
    _topic(admin, open_topic)
    _create(admin, _acl(ResourceType.TOPIC, locked, AclOperation.WRITE, DENY),
            _acl(ResourceType.TOPIC, locked, AclOperation.READ, DENY))
    err = _produce_error(broker.bootstrap, locked)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _produce_error(broker.bootstrap, open_topic) is None
    err = _consume_error(broker.bootstrap, locked, _name("g"))
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_topic_only_others_may_describe_is_absent_from_metadata(broker: BrokerProcess, admin: AdminClient) -> None:
    private = _name("private")
    _topic(admin, private, partitions=2)
    assert private in admin.list_topics(timeout=10).topics
    _create(admin, _acl(ResourceType.TOPIC, private, AclOperation.READ, principal="User:alice"))
    assert private not in admin.list_topics(timeout=10).topics
    named = admin.list_topics(private, timeout=10).topics[private]
    assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    err = _produce_error(broker.bootstrap, private)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_group_and_transactional_id_acls(broker: BrokerProcess, admin: AdminClient) -> None:
    topic, group, txn = _name("grouped"), _name("blocked-group"), _name("txn")
    _topic(admin, topic)
    _create(admin, _acl(ResourceType.GROUP, group, AclOperation.READ, DENY),
            _acl(ResourceType.TRANSACTIONAL_ID, txn, AclOperation.WRITE, DENY))
    err = _consume_error(broker.bootstrap, topic, group)
    assert err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn})
    with pytest.raises(KafkaException) as info:
        producer.init_transactions(10)
    assert info.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_create_topics_needs_create_on_the_cluster_or_the_topic(admin: AdminClient) -> None:
    prefix = _name("nocreate")
    # Without CREATE on the cluster, CREATE on the topic decides (no ACL on it: allowed here).
    # Once the cluster has an ACL, allow.everyone.if.no.acl.found no longer covers it: ALL
    # keeps the rest of the cluster operations (CreateAcls, DescribeCluster...) allowed.
    _create(admin, _acl(ResourceType.BROKER, "kafka-cluster", AclOperation.ALL),
            _acl(ResourceType.BROKER, "kafka-cluster", AclOperation.CREATE, DENY),
            _acl(ResourceType.TOPIC, prefix, AclOperation.CREATE, DENY, pattern=PRE))
    refused, allowed = f"{prefix}-a", _name("creatable")
    futures = admin.create_topics([NewTopic(refused, 1, 1), NewTopic(allowed, 1, 1)])
    futures[allowed].result(10)
    with pytest.raises(KafkaException) as info:
        futures[refused].result(10)
    assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_authorized_operations_are_returned_when_asked(admin: AdminClient) -> None:
    topic = _name("ops")
    _topic(admin, topic)
    _create(admin, _acl(ResourceType.TOPIC, topic, AclOperation.READ))  # only READ (and DESCRIBE) now
    described = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[topic].result(10)
    assert set(described.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert AclOperation.ALTER in cluster.authorized_operations


def test_acls_survive_a_restart_and_super_users_bypass_them(broker_factory: Callable[..., BrokerProcess]) -> None:
    settings = dict(BROKER_SETTINGS)
    b = broker_factory(settings)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    _topic(admin, "kept")
    _create(admin, _acl(ResourceType.TOPIC, "kept", AclOperation.WRITE, DENY))
    assert _produce_error(b.bootstrap, "kept").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED  # type: ignore[union-attr]
    b.stop()
    b.settings["super.users"] = ANON
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(everything).result(10) == [
        _acl(ResourceType.TOPIC, "kept", AclOperation.WRITE, DENY)]
    assert _produce_error(b.bootstrap, "kept") is None  # a super user is never denied
    b.stop()
    del b.settings["super.users"]
    b.start()
    assert _produce_error(b.bootstrap, "kept").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED  # type: ignore[union-attr]


def test_without_an_authorizer_acl_apis_answer_security_disabled(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory({}, name="plain")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    with pytest.raises(KafkaException) as info:
        _create(admin, _acl(ResourceType.TOPIC, "t", AclOperation.READ))
    assert info.value.args[0].code() == KafkaError.SECURITY_DISABLED


def test_the_acls_command_adds_lists_and_removes(broker: BrokerProcess, admin: AdminClient) -> None:
    from tests.integration.test_cli import fails, ok

    b = broker.bootstrap
    topic, group = _name("cli"), _name("cli-group")
    added = ok("acls", "add", "--allow-principal", "User:carol", "--consumer", "--topic", topic, "--group", group,
               "-b", b).stdout
    assert "added 3 ACL(s)" in added
    ok("acls", "add", "--deny-principal", ANON, "--operation", "Write", "--topic", topic, "-b", b)
    wanted = {_acl(ResourceType.TOPIC, topic, AclOperation.READ, principal="User:carol"),
              _acl(ResourceType.TOPIC, topic, AclOperation.DESCRIBE, principal="User:carol"),
              _acl(ResourceType.GROUP, group, AclOperation.READ, principal="User:carol"),
              _acl(ResourceType.TOPIC, topic, AclOperation.WRITE, DENY)}
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    assert wanted <= set(admin.describe_acls(everything).result(10))
    assert _produce_error(b, topic).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED  # type: ignore[union-attr]
    listed = ok("acls", "list", "--topic", topic, "-b", b).stdout.splitlines()
    assert f"TOPIC:LITERAL:{topic}  {ANON} DENY WRITE from host *" in listed
    assert len(listed) == 3
    removed = ok("acls", "remove", "--deny-principal", ANON, "--topic", topic, "-b", b).stdout
    assert "removed 1 ACL(s)" in removed
    # carol's ACLs still cover the topic: allow.everyone.if.no.acl.found no longer applies
    assert _produce_error(b, topic).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED  # type: ignore[union-attr]
    assert "removed 2 ACL(s)" in ok("acls", "remove", "--topic", topic, "-b", b).stdout
    assert _produce_error(b, topic) is None
    assert "TYPE:NAME" in fails("acls", "add", "--allow-principal", "carol", "--topic", topic, "-b", b)
    assert "unknown operation 'Fly'" in fails("acls", "add", "--allow-principal", "User:c", "--operation", "Fly",
                                              "--topic", topic, "-b", b)
    assert "name a resource" in fails("acls", "add", "--allow-principal", "User:c", "-b", b)


def test_kafka_python_admin_manages_acls(broker: BrokerProcess) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.admin import (
            ACL,
            ACLFilter,
            ACLOperation,
            ACLPermissionType,
            ACLResourcePatternType,
            KafkaAdminClient,
            ResourcePattern,
            ResourcePatternFilter,
        )
        from kafka.admin import ResourceType as KResourceType

    topic = _name("kp")
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        acl = ACL("User:dave", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                  ResourcePattern(KResourceType.TOPIC, topic, ACLResourcePatternType.PREFIXED))
        created = client.create_acls([acl])
        assert created["succeeded"] == [acl] and not created["failed"]
        by_dave = ACLFilter("User:dave", None, ACLOperation.ANY, ACLPermissionType.ANY,
                            ResourcePatternFilter(KResourceType.ANY, None, ACLResourcePatternType.ANY))
        found, error = client.describe_acls(by_dave)
        assert found == [acl] and error.errno == 0
        [(_filter, deleted, error)] = client.delete_acls([by_dave])
        assert deleted == [acl] and error.errno == 0
        assert client.describe_acls(by_dave)[0] == []
    finally:
        client.close()


def test_a_closed_broker_grants_only_what_acls_allow(broker_factory: Callable[..., BrokerProcess]) -> None:
    """allow.everyone.if.no.acl.found=false (Kafka's default): ACLs are set up while
    ANONYMOUS is a super user, then the broker restarts without it."""
    settings = {"authorizer.class.name": STANDARD, "super.users": ANON}
    b = broker_factory(settings, name="closed")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for name in ("w-1", "other"):
        _topic(admin, name)
    _create(admin, _acl(ResourceType.TOPIC, "w-", AclOperation.WRITE, pattern=PRE),
            _acl(ResourceType.TOPIC, "w-", AclOperation.READ, pattern=PRE),
            _acl(ResourceType.GROUP, "g-ok", AclOperation.READ),
            _acl(ResourceType.TRANSACTIONAL_ID, "txn-ok", AclOperation.WRITE))
    b.stop()
    del b.settings["super.users"]
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    # an idempotent producer may start with WRITE on some topic (KIP-679), and write there only
    assert _produce_error(b.bootstrap, "w-1", **{"enable.idempotence": True}) is None
    err = _produce_error(b.bootstrap, "other", **{"enable.idempotence": True})
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert set(admin.list_topics(timeout=10).topics) == {"w-1"}  # WRITE implies DESCRIBE
    err = _consume_error(b.bootstrap, "w-1", "any-group")
    assert err.code() in (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException) as info:
        _create(admin, _acl(ResourceType.TOPIC, "*", AclOperation.ALL))
    assert info.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # what the ACLs allow works end to end: a transaction with its consumer offsets, a group
    txn = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "txn-ok"})
    txn.init_transactions(10)
    txn.begin_transaction()
    txn.produce("w-1", b"in-txn")
    group_meta = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g-ok"}).consumer_group_metadata()
    txn.send_offsets_to_transaction([TopicPartition("w-1", 0, 0)], group_meta, 10)
    txn.commit_transaction(10)
    reader = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g-ok", "auto.offset.reset": "earliest",
                       "isolation.level": "read_committed", "session.timeout.ms": 6000})
    try:
        reader.subscribe(["w-1"])
        values = []
        for _ in range(100):
            msg = reader.poll(0.2)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
            if b"in-txn" in values:
                break
        assert b"in-txn" in values
        reader.commit(asynchronous=False)
    finally:
        reader.close()
    # nor may a transaction write a topic without WRITE on it
    failures: list[KafkaError] = []
    txn.begin_transaction()
    try:
        txn.produce("other", b"refused", on_delivery=lambda err, _m: failures.append(err))
    except KafkaException as exc:
        # produce() asks for the new topic's metadata and then partitions the record; when
        # the broker's answer (authorization failed) is handled in between, on librdkafka's
        # own thread, produce() itself fails (seen on a loaded machine); else the refusal
        # comes to the record's delivery callback and fails the commit
        failures.append(exc.args[0])
        txn.abort_transaction(10)
    else:
        with pytest.raises(KafkaException):
            txn.commit_transaction(10)
    assert [f.code() for f in failures] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    producer = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "no-such-right"})
    with pytest.raises(KafkaException) as txn:
        producer.init_transactions(10)
    assert txn.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_admin_apis_refuse_a_denied_topic_and_group(broker: BrokerProcess, admin: AdminClient) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        OffsetSpec,
    )
    from confluent_kafka.admin import ResourceType as ConfigType

    denied, partial, group = _name("denied-admin"), _name("partial-admin"), _name("denied-group")
    _topic(admin, denied)
    _topic(admin, partial)
    # partial: everything but what these APIs need (DESCRIBE stays, so clients find its leader)
    _create(admin, _acl(ResourceType.TOPIC, denied, AclOperation.ALL, DENY),
            _acl(ResourceType.TOPIC, partial, AclOperation.ALL),
            *[_acl(ResourceType.TOPIC, partial, op, DENY) for op in (
                AclOperation.DELETE, AclOperation.ALTER, AclOperation.ALTER_CONFIGS, AclOperation.DESCRIBE_CONFIGS)],
            _acl(ResourceType.GROUP, group, AclOperation.ALL, DENY))

    def code(future: Any) -> int:
        with pytest.raises(KafkaException) as info:
            future.result(10)
        return int(info.value.args[0].code())

    topic_denied = KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert code(admin.describe_topics(TopicCollection([denied]))[denied]) == topic_denied
    resource = ConfigResource(ConfigType.TOPIC, partial)
    assert code(admin.describe_configs([resource])[resource]) == topic_denied
    altered = ConfigResource(ConfigType.TOPIC, partial, incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    assert code(admin.incremental_alter_configs([altered])[altered]) == topic_denied
    assert code(admin.create_partitions([NewPartitions(partial, 2)])[partial]) == topic_denied
    tp = TopicPartition(partial, 0, 0)
    assert code(admin.delete_records([tp])[tp]) == topic_denied
    assert code(admin.delete_topics([partial])[partial]) == topic_denied
    tp = TopicPartition(partial, 0)
    assert admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(10).offset == 0  # DESCRIBE is enough
    group_denied = KafkaError.GROUP_AUTHORIZATION_FAILED
    assert code(admin.describe_consumer_groups([group])[group]) == group_denied
    assert code(admin.delete_consumer_groups([group])[group]) == group_denied
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    assert code(offsets[group]) == group_denied
    # a KIP-848 consumer's heartbeat needs READ on its group
    err = _consume_error(broker.bootstrap, _name("open-topic"), group, **{"group.protocol": "consumer"})
    assert err.code() == group_denied


def test_share_groups_need_read_on_the_group(broker: BrokerProcess, admin: AdminClient) -> None:
    from confluent_kafka import ShareConsumer

    from tests.integration.test_share_groups import _start_from_earliest

    topic, allowed, denied = _name("shared"), _name("share-ok"), _name("share-denied")
    _topic(admin, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        producer.produce(topic, b"s%d" % i)
    assert producer.flush(10) == 0
    _create(admin, _acl(ResourceType.GROUP, denied, AclOperation.READ, DENY))
    _start_from_earliest(broker.bootstrap, allowed, topic)

    def share_read(group: str) -> tuple[list[bytes], list[int]]:
        consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
        values: list[bytes] = []
        errors: list[int] = []
        try:
            consumer.subscribe([topic])
            for _ in range(50):
                try:
                    batch = consumer.poll(0.2).records()
                except KafkaException as exc:
                    errors.append(exc.args[0].code())
                    break
                for m in batch:
                    if m.error():
                        errors.append(m.error().code())
                    else:
                        values.append(m.value())
                if len(values) >= 5 or errors:
                    break
        finally:
            consumer.close()
        return values, errors

    values, errors = share_read(allowed)
    assert sorted(values) == [b"s%d" % i for i in range(5)] and not errors
    values, errors = share_read(denied)
    assert not values and KafkaError.GROUP_AUTHORIZATION_FAILED in errors
