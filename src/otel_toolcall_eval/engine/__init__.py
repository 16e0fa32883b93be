"""The scoring engine: the one place per-call scoring happens, for every adapter (processor, replay, offline).

Layers, one way (enforced by import-linter in ``make test``): records and policy objects <- checks <- engine <-
adapters (processor, judge, offline, replay, harvest) <- CLI.
"""

from otel_toolcall_eval.engine.call import PolicyIndex, Scorer, call_digest_of, call_key, policy_violations

__all__ = ["PolicyIndex", "Scorer", "call_digest_of", "call_key", "policy_violations"]
