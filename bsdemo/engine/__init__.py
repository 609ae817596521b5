"""The training engine: data, models, the training loop and its measurements.

Runs in worker processes (and the CLI) only: this package is the one place that imports torch.
Import its modules directly (`bsdemo.engine.train`); this file imports nothing.
"""
