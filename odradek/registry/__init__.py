"""A Confluent-compatible Schema Registry served beside the broker (DESIGN.md "Schema Registry").

`http.py` serves HTTP/1.1 on asyncio streams, `api.py` routes Confluent's REST API onto `state.py`
(subjects, versions, ids, configs, modes), `avro_compat.py` computes Avro compatibility by the
schema resolution rules, and `store.py` keeps the state in the compacted `_schemas` topic in the
record format Confluent's registry writes, through the `RegistryHost` port (`host.py`).
"""
