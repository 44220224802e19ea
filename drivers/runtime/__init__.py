"""Running the flows: the engine (Hamilton drivers, run hooks, the cache), cancellation,
OpenTelemetry spans and drawing the DAGs."""
