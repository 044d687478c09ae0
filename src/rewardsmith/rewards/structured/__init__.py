"""Structured-output rewards: ``json_schema``, ``json_match`` and ``tool_call``."""

from __future__ import annotations

from .match import json_match
from .schema import json_schema
from .toolcalls import ToolCall, read_calls, tool_call

__all__ = ["ToolCall", "json_match", "json_schema", "read_calls", "tool_call"]
