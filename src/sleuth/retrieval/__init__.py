"""Retrieval: embedding models and hybrid search over a collection."""
