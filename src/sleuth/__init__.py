"""sleuth — an agentic RAG engine that reasons, searches and answers with checked citations."""

__version__ = "0.1.0"
