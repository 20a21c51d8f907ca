"""sleuth.agents"""
