"""sleuth.ingest"""
