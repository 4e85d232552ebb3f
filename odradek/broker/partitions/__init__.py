"""Partition state on this broker: topics and their partitions, fetch sessions (KIP-227), internal-
topic creation and log-dir failures.
"""
