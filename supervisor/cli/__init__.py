"""The ``agentd`` command line (entry point: :func:`main`)."""

from .app import cli, main

__all__ = ["cli", "main"]
