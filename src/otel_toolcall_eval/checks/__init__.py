"""Pure checks over plain records: no OpenTelemetry import, shared by the processor, the judge and the CLI.

One module per check, named after what it decides.
"""
