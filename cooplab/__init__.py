"""cooplab: societies of LLM agents and teams of LLM scientists as LangGraph state graphs."""

__version__ = "0.1.0"
