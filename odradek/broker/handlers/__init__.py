"""Request handlers, one module per API family; importing this package registers them all."""

from odradek.broker.handlers import (  # noqa: F401
    acls,
    admin_topics,
    api_versions,
    cluster,
    configs,
    delete_records,
    elect_leaders,
    fetch,
    groups,
    init_producer_id,
    leader_epoch,
    list_offsets,
    log_dirs,
    metadata,
    offsets,
    produce,
    quotas,
    transactions,
    txn_admin,
)
