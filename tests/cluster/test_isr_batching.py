"""ISR changes are batched into one metadata update, as Kafka's AlterPartition batches its
partitions: a follower that falls behind (or catches up) on many partitions at once changes
all their ISRs with one store write, not one write (an fsync on the event loop) each."""

from __future__ import annotations

import threading

from kafka import KafkaProducer

from odradek.broker.cluster.metadata_store import LocalMetadataStore

PARTITIONS = 12


def test_many_partitions_leave_and_rejoin_the_isr_in_few_metadata_writes(
    make_cluster, monkeypatch
) -> None:
    cluster = make_cluster(2, topics={"many": (PARTITIONS, 2)})
    for p in range(PARTITIONS):
        cluster.wait_for_isr("many", p, size=2)
    saves: list[int] = []
    save = LocalMetadataStore._save

    def counted(store: LocalMetadataStore) -> None:
        saves.append(1)
        save(store)

    monkeypatch.setattr(LocalMetadataStore, "_save", counted)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks=1, linger_ms=0)
    stop = threading.Event()

    def keep_writing() -> None:  # moving log ends: a cut-off follower is then out of sync
        while not stop.is_set():
            for p in range(PARTITIONS):
                producer.send("many", b"x", partition=p)
            stop.wait(0.05)

    writer = threading.Thread(target=keep_writing, daemon=True)
    writer.start()
    try:
        cluster.cut_off_peers(1)  # neither broker replicates from the other
        for p in range(PARTITIONS):
            assert cluster.wait_for_isr("many", p, size=1) == [cluster.leader("many", p)]
    finally:
        stop.set()
        writer.join(10)
        producer.flush(10)
        producer.close()
    shrink_saves = len(saves)
    assert 0 < shrink_saves < PARTITIONS // 2, f"{shrink_saves} writes for {PARTITIONS} shrinks"

    del saves[:]
    cluster.cut_off_peers(1, cut=False)
    for p in range(PARTITIONS):
        cluster.wait_for_isr("many", p, size=2)
    assert 0 < len(saves) < PARTITIONS // 2, f"{len(saves)} writes for {PARTITIONS} expansions"
