"""Offline demos: small, deterministic agents that run with no key and no network."""
