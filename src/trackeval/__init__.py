"""trackeval: evaluate medical-imaging model versions, track them in MLflow and gate their promotion."""

__version__ = "0.1.0"
