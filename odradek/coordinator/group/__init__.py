"""The classic group coordinator (Kafka's GroupCoordinator and GroupMetadataManager).

`metadata` holds a group and its members; `state` is the group state machine (groups, sessions,
persistence, Heartbeat, LeaveGroup) with `join` (JoinGroup and the rebalance it drives) and `sync`
(SyncGroup) mixed in; `offsets` commits, fetches, deletes and expires offsets; `records` is the
`__consumer_offsets` record format; `loader` replays a partition of it; `timers` are the delayed
operations; `assignment` reads the embedded consumer protocol; and `coordinator` is the asyncio
service the broker runs, owning the offsets-topic partitions this broker leads.
"""
