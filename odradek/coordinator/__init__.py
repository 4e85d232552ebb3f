"""Coordinators: the group coordinator (consumer groups, committed offsets) and the transaction
coordinator, each keeping its state as records in a compacted internal topic."""
