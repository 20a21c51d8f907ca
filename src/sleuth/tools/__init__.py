"""sleuth.tools"""
