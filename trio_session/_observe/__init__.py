"""The observers: log records and OpenTelemetry spans."""
