"""Replication between brokers, as Kafka's ReplicaManager family.

- `manager.py`: a broker's replicas; becomes leader or follower as the metadata store says.
- `isr.py`: leader-side follower tracking, the high watermark and ISR shrink/expand decisions.
- `fetcher.py`: one fetcher task per leader broker, with OffsetForLeaderEpoch truncation.
- `purgatory.py`: acks=all produce waiting for the high watermark.
- `client.py`: the broker-to-broker Kafka protocol client the fetchers use.
"""
