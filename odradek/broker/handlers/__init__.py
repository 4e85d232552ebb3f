"""Request handlers, one module per API family; importing this package registers them all."""

from odradek.broker.handlers import (  # noqa: F401
    admin_topics,
    api_versions,
    cluster,
    configs,
    delete_records,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)
