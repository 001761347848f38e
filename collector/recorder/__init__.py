"""Capture: what the application runs to record.

The OTel span and log-record exporters, `record()`, `agent_run`, redaction, and the distro and
configurator `opentelemetry-instrument` loads. Writes files in the store's layout.
"""
