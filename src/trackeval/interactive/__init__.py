"""IMIS interactive segmentation: prompts, click simulation, the model protocol, the loop and logs."""
