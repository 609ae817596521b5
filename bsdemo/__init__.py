"""Batch Size Lab: an interactive lab on how batch size shapes neural-network training."""

__version__ = "0.4.0"
