"""The classic group coordinator (Kafka's GroupCoordinator and GroupMetadataManager).

`metadata` holds a group and its members; `state` is the group state machine, the one class
that moves a group between states (its transition table, the rebalance, sessions, persistence,
Heartbeat, LeaveGroup); `join` (JoinGroupOp, JoinParams) and `sync` (SyncGroupOp, SyncParams)
take those requests as one typed object each and drive the machine; `offsets` commits, fetches,
deletes and expires offsets; `records` is the `__consumer_offsets` record format (on
`coordinator/codec.py`); `loader` replays a partition of it; `timers` are the delayed operations;
`assignment` reads the embedded consumer protocol; and `coordinator` is the asyncio service the
broker runs, owning the offsets-topic partitions this broker leads.
"""
