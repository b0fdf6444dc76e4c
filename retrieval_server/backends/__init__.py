"""Adapters to the outside world, one narrow interface per concern."""
