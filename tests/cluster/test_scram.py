"""SCRAM credentials in a cluster: kept in ZooKeeper under /config/users as Kafka keeps them,
mirrored by every broker, so a user created (or deleted) through one broker is known (or
gone) on the others, also on a broker started after the change."""

from __future__ import annotations

import base64
import hashlib
import json
import time

from kazoo.client import KazooClient
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kio.schema.describe_user_scram_credentials.v0.request import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from kio.static.primitive import i8, i32

from streamkit.broker.security.scram import credential_from_password
from streamkit.testing import ZooKeeperServer
from streamkit.testing_cluster import BrokerCluster
from tests.integration.util import call, connect, wait_until

CLUSTER_SIZE = 2
SHA256 = i8(1)


def _describe(bootstrap: str, user: str) -> tuple[int, tuple[tuple[int, int], ...]]:
    with connect(bootstrap) as sock:
        response = call(sock, DescribeUserScramCredentialsRequest(users=(UserName(name=user),)))
    (result,) = response.results
    return int(result.error_code), tuple((int(c.mechanism), int(c.iterations)) for c in result.credential_infos)


def _alter(bootstrap: str, body: AlterUserScramCredentialsRequest) -> int:
    with connect(bootstrap) as sock:
        (result,) = call(sock, body).results
    return int(result.error_code)


def test_a_user_created_on_one_broker_is_known_on_every_broker(cluster: BrokerCluster,
                                                               zookeeper: ZooKeeperServer) -> None:
    salt = b"0123456789abcdef"
    salted = hashlib.pbkdf2_hmac("sha256", b"zed-secret", salt, 4096)
    upsert = ScramCredentialUpsertion(name="zed", mechanism=SHA256, iterations=i32(4096), salt=salt,
                                      salted_password=salted)
    assert _alter(cluster[0].bootstrap, AlterUserScramCredentialsRequest(deletions=(), upsertions=(upsert,))) == 0
    wait_until(lambda: _describe(cluster[1].bootstrap, "zed") == (0, ((1, 4096),)), 10, "broker 1 knows zed")
    # stored as Kafka stores it (kafka-configs.sh --describe --entity-type users reads this)
    zk = KazooClient(hosts=zookeeper.address)
    zk.start()
    try:
        data, _ = zk.get(f"{cluster.chroot}/config/users/zed")
    finally:
        zk.stop()
        zk.close()
    expected = credential_from_password("SCRAM-SHA-256", "zed-secret", 4096, salt)
    b64 = base64.b64encode
    assert json.loads(data) == {"version": 1, "config": {"SCRAM-SHA-256": (
        f"salt={b64(salt).decode()},stored_key={b64(expected.stored_key).decode()},"
        f"server_key={b64(expected.server_key).decode()},iterations=4096")}}
    # a broker that was down during a deletion learns it when it comes back
    cluster.stop(1)
    deletion = ScramCredentialDeletion(name="zed", mechanism=SHA256)
    assert _alter(cluster[0].bootstrap, AlterUserScramCredentialsRequest(deletions=(deletion,), upsertions=())) == 0
    cluster.start(1)
    deadline = time.monotonic() + 10
    while _describe(cluster[1].bootstrap, "zed")[0] != 91 and time.monotonic() < deadline:  # RESOURCE_NOT_FOUND
        time.sleep(0.1)
    assert _describe(cluster[1].bootstrap, "zed") == (91, ())
