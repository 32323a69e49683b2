"""Importers that turn other tools' output into memlens runs."""
