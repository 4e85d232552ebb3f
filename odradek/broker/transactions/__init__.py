"""The broker side of transactions: the coordinator's host (its view of this broker) and the marker
writer (WriteTxnMarkers).
"""
