"""KIP-714 client telemetry: ClientMetrics subscriptions, client instances, pushed OTLP metrics."""
