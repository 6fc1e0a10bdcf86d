"""Mutation testing of the pure modules (``python -m bench.mutation``); see README.md beside this file."""
