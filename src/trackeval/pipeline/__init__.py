"""The DVC pipeline's stages (``trackeval pipeline <stage>``) and ``trackeval data fetch``; see ``dvc.yaml``."""
