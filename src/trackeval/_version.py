"""trackeval's version: the one definition, a leaf module that any layer may import.

``results.json`` records it (``trackeval_version``) and the per-case cache keys on it
(:func:`trackeval.engine.cache.code_identity`); ``pyproject.toml`` holds the same string for packaging.
"""

__version__ = "0.2.0"
