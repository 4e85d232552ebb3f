"""The transaction coordinator (Kafka's TransactionCoordinator and TransactionStateManager).

`state` is a transactional id's metadata and its state machine, `records` the
`__transaction_state` record format (on `coordinator/codec.py`), `manager` the state manager
(loading, the transactional-id map, persisting each transition to the log before applying it),
and `coordinator` the operations, the asyncio service the broker runs: it answers the
transactional APIs, writes the commit/abort markers through the broker, aborts timed-out
transactions and expires idle ids.
"""
