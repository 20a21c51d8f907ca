"""Persistence: the search index (local or Milvus) and the SQL catalog."""
