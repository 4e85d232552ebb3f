"""The transaction coordinator (Kafka's TransactionCoordinator and TransactionStateManager).

`state` is a transactional id's metadata and its state machine, `records` the
`__transaction_state` record format, and `coordinator` the asyncio service the broker runs: it
answers the transactional APIs, persists every transition before acting on it, writes the
commit/abort markers through the broker, aborts timed-out transactions and expires idle ids.
"""
