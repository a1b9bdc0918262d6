"""Privacy: what never reaches a store. `<private>` spans and credentials are scrubbed from every
text before it is stored (scrub), by maintained rule sets run in Python (secret_rules, rule_filters)
and detect-secrets plugins for prose (secret_detectors).
"""
