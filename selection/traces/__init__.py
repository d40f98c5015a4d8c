"""Traces: the hash chain, the trace explorer, redaction, retention, labelling and outcome reports."""
