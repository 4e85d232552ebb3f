"""Cluster metadata: the metadata store interface and its in-process and ZooKeeper implementations,
the controller, and the in-process cluster.
"""
