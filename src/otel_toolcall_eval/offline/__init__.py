"""Offline evaluation: a ground-truth dataset, run files of what the agent did, metrics, reports and a CI gate.

Kept import-free: ``otel_toolcall_eval.config`` imports ``offline.config`` and the processor must not pay for
the runner or the reports.
"""
