"""The operations each resource type allows when no authorizer is configured (Kafka's
`AclOperation` codes), as reported in authorized-operations fields (KIP-430).

Metadata, DescribeCluster, DescribeTopicPartitions and DescribeGroups answer with these; an
authorizer (the security work of issue 11/12) will narrow them per principal.

AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
"""

from __future__ import annotations

CLUSTER_OPERATIONS = (5, 7, 8, 9, 10, 11, 12)
TOPIC_OPERATIONS = (3, 4, 5, 6, 7, 8, 10, 11)


def operations_bitfield(ops: tuple[int, ...]) -> int:
    """The int32 bit field of the wire (bit n set for operation n)."""
    bits = 0
    for op in ops:
        bits |= 1 << op
    return bits
