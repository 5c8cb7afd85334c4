"""Importers and exporters: the CLI and uploads share them."""
