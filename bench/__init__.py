"""Throughput and latency benchmarks for odradek with real Kafka clients.

`python -m bench` produces and then consumes N records per record size through confluent-kafka
(librdkafka), against an odradek broker it starts as a child process or against any broker given
by `--bootstrap`, and prints a markdown table: messages/s, MB/s, produce latency percentiles from
delivery reports, and the broker's CPU seconds and peak RSS per phase, read from /proc.
It also reports how long a fresh broker takes to answer its first ApiVersions request and the
broker's RSS after about 1 GB has been written. Timings are reported, never asserted.
"""
