"""The server: connections, dispatch, handlers, partitions, replication, controller."""
