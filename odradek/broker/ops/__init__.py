"""Operations: Prometheus metrics, the admin HTTP endpoint and fault injection."""
