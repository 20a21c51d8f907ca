"""sleuth.llm"""
