"""One handler per Kafka API, keyed by api_key."""

from __future__ import annotations

from streamkit.broker.handlers import (
    acls,
    admin,
    cluster,
    consumer_groups,
    data,
    groups,
    leaders,
    quotas,
    share,
    txn,
)
from streamkit.broker.handlers.common import Handler
from streamkit.broker.security.enforce import guarded
from streamkit.broker.security.throttling import throttled

__all__ = ["HANDLERS"]

HANDLERS: dict[int, Handler] = throttled(guarded({
    0: data.produce,
    1: data.fetch,
    2: data.list_offsets,
    3: cluster.metadata,
    8: groups.offset_commit,
    9: groups.offset_fetch,
    10: cluster.find_coordinator,
    11: groups.join_group,
    12: groups.heartbeat,
    13: groups.leave_group,
    14: groups.sync_group,
    15: groups.describe_groups,
    16: groups.list_groups,
    18: cluster.api_versions,
    19: admin.create_topics,
    20: admin.delete_topics,
    21: data.delete_records,
    22: cluster.init_producer_id,
    23: data.offset_for_leader_epoch,
    24: txn.add_partitions_to_txn,
    25: txn.add_offsets_to_txn,
    26: txn.end_txn,
    27: txn.write_txn_markers,
    28: txn.txn_offset_commit,
    29: acls.describe_acls,
    30: acls.create_acls,
    31: acls.delete_acls,
    32: admin.describe_configs,
    33: admin.alter_configs,
    37: admin.create_partitions,
    42: groups.delete_groups,
    43: leaders.elect_leaders,
    44: admin.incremental_alter_configs,
    45: leaders.alter_partition_reassignments,
    46: leaders.list_partition_reassignments,
    48: quotas.describe_client_quotas,
    49: quotas.alter_client_quotas,
    60: cluster.describe_cluster,
    65: txn.describe_transactions,
    66: txn.list_transactions,
    68: consumer_groups.consumer_group_heartbeat,
    69: consumer_groups.consumer_group_describe,
    76: share.share_group_heartbeat,
    77: share.share_group_describe,
    78: share.share_fetch,
    79: share.share_acknowledge,
    90: share.describe_share_group_offsets,
    91: share.alter_share_group_offsets,
    92: share.delete_share_group_offsets,
}))
