"""The document-level systems, one package each, each implementing ``pipeline/system.py``."""
