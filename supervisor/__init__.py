"""agentd: an init.d-style supervisor for AI coding agents whose state can be rebuilt."""

__version__ = "0.1.0"
