"""The network edge: connections, framing and muting, the memory pool, dispatch, the handler
registry and the request context.
"""
