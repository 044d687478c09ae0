"""``tool_calls``, ``turn_budget`` and ``workspace_files``: a trajectory's tools, turns and files.

``tool_calls``: the tools are declared as in an OpenAI request (``{"type": "function",
"function": {"name", "parameters"}}``, or flat ``{"name", "parameters"}``) in the ``tools``
param, else ``metadata["tools"]``, else a prompt given as a request object with ``tools``. Each
call the trajectory made (every assistant turn's ``tool_calls``; for a text completion, the calls
its JSON or ``<tool_call>`` blocks hold) is valid when it names a declared tool and its arguments
are a JSON object valid for that tool's ``parameters`` schema. The reward is the share of valid
calls (``mode: fraction``) or 1/0 for all of them (``mode: all``); fewer than ``min_calls`` calls
(default 1) is 0, so a trajectory cannot earn it by calling nothing. No declared tools, or a
declared schema that is not a JSON schema, is an error: the task is at fault, not the policy.

``turn_budget``: 1.0 up to ``max_turns`` assistant turns, falling linearly to 0.0 at ``zero_at``
turns (``(zero_at - n) / (zero_at - max_turns)`` between them). With ``max_turns: 1`` and
``zero_at: D + 1`` it is ``max(0, 1 - (n - 1) / D)``. A trajectory that says and does nothing
(no turn, or only blank turns) or was cut at the length limit gets 0: it did not finish within
any budget.

``workspace_files``: the files the agent wrote, from ``metadata["files_written"]`` (a list the
environment fills in) or else from the paths of its write-tool calls (``write_tools``: tool name
-> argument holding the path; default ``write_file``, ``create_file``, ``edit_file`` and
``str_replace_editor`` with ``path``). Paths are normalised (``./a/../b`` is ``b``); one that
leaves the workspace (``../x``, absolute) is outside unless an allowed pattern names it.
``allowed`` holds glob patterns (``*`` also crosses folders); ``required`` paths must be among
the files written, else 0. ``mode: all`` (default) gives 1.0 when every file is allowed, else
0.0; ``mode: fraction`` the share of files that are. Writing nothing is tidy (1.0) unless
something is required.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from ...trajectory import ToolCall, turns
from ...types import Rollout, stable_json
from .._registry import builtin

__all__ = ["tool_calls", "turn_budget", "workspace_files"]

MODES = ("fraction", "all")
DEFAULT_WRITE_TOOLS = {"write_file": "path", "create_file": "path", "edit_file": "path",
                       "str_replace_editor": "path"}


# -- tool_calls

def _tool_entry(spec: Any, where: str) -> tuple[str, Any]:
    if not isinstance(spec, Mapping):
        raise ValueError(f"{where}: a declared tool must be an object, got {type(spec).__name__}")
    function = spec.get("function")
    body: Mapping[str, Any] = function if isinstance(function, Mapping) else spec
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: a declared tool needs a 'name'")
    schema = body.get("parameters", body.get("input_schema"))
    if schema is not None and not isinstance(schema, (Mapping, bool)):
        raise ValueError(f"{where} ({name}): 'parameters' must be a JSON schema object")
    return name, schema


def _declared(tools: Any, metadata: Mapping[str, Any], prompt: Any) -> tuple[dict[str, Any], str]:
    """The declared tools (name -> parameters schema or None) and where they came from."""
    for where, found in (("params.tools", tools), ("metadata.tools", metadata.get("tools")),
                         ("prompt.tools", prompt.get("tools") if isinstance(prompt, Mapping)
                          else None)):
        if found is None:
            continue
        if isinstance(found, str):
            try:
                found = json.loads(found)
            except ValueError:
                raise ValueError(f"{where}: not valid JSON") from None
        if not isinstance(found, Sequence) or isinstance(found, (str, bytes)):
            raise ValueError(f"{where}: expected a list of tools, got {type(found).__name__}")
        return dict(_tool_entry(spec, f"{where}[{i}]") for i, spec in enumerate(found)), where
    raise ValueError("no tools declared: give the tools in params.tools, metadata.tools or a "
                     "prompt object's 'tools'")


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str, where: str) -> Any:
    import jsonschema

    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"{where}: not a valid JSON schema: {exc.message}") from None
    return cls(schema)


def _text_calls(text: str) -> list[tuple[str, Any]]:
    from ..structured.jsontext import NotJSON
    from ..structured.toolcalls import read_calls

    if not text.strip():
        return []
    try:
        return [(call.name, call.arguments) for call in read_calls(text)]
    except NotJSON:
        return []  # prose: no call


def _calls_made(rollout: Rollout) -> list[tuple[str, Any]]:
    """(name, arguments or None when they are not a JSON object) for every call made: each
    assistant turn's ``tool_calls``, or, for a turn without them, the calls its text holds."""
    made: list[tuple[str, Any]] = []
    for turn in turns(rollout):
        if turn.tool_calls:
            made.extend((call.name, _arguments_of(call)) for call in turn.tool_calls)
        else:
            made.extend(_text_calls(turn.text))
    return made


def _arguments_of(call: ToolCall) -> Any:
    if call.arguments:
        return call.arguments
    raw = call.raw_arguments.strip()
    if not raw:
        return {}
    try:
        decoded = json.loads(raw)
    except ValueError:
        return None
    return decoded if isinstance(decoded, dict) else None


def _check_tool_calls(params: Mapping[str, Any]) -> None:
    if params.get("mode") not in MODES:
        raise ValueError(f"tool_calls: mode must be one of {', '.join(MODES)}, "
                         f"not {params.get('mode')!r}")
    _whole("tool_calls", "min_calls", params.get("min_calls"), low=0)
    if params.get("tools") is not None:
        declared, where = _declared(params["tools"], {}, None)
        for name, schema in declared.items():
            if schema is not None:
                _validator(stable_json(schema), f"{where} ({name})")


@builtin("tool_calls", kind="rule", check=_check_tool_calls)
def tool_calls(rollout: Rollout, tools: Any = None, mode: str = "fraction",
               min_calls: int = 1) -> dict[str, float]:
    """Every tool call names a declared tool with arguments valid for its JSON schema."""
    declared, where = _declared(tools, rollout.metadata, rollout.prompt)
    made = _calls_made(rollout)
    unknown = bad_arguments = schema_invalid = 0
    for name, arguments in made:
        if name not in declared:
            unknown += 1
        elif arguments is None:
            bad_arguments += 1
        elif declared[name] is not None and not _validator(
                stable_json(declared[name]), f"{where} ({name})").is_valid(arguments):
            schema_invalid += 1
    valid = len(made) - unknown - bad_arguments - schema_invalid
    if len(made) < min_calls or not made:
        reward = 0.0 if len(made) < min_calls else 1.0
    elif mode == "all":
        reward = 1.0 if valid == len(made) else 0.0
    else:
        reward = valid / len(made)
    return {"reward": reward, "calls": float(len(made)), "valid": float(valid),
            "unknown_tool": float(unknown), "bad_arguments": float(bad_arguments),
            "schema_invalid": float(schema_invalid)}


# -- turn_budget

def _whole(reward: str, key: str, value: Any, *, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{reward}: {key} must be a whole number >= {low}, not {value!r}")
    return value


def _check_turn_budget(params: Mapping[str, Any]) -> None:
    full = _whole("turn_budget", "max_turns", params.get("max_turns"), low=1)
    zero = _whole("turn_budget", "zero_at", params.get("zero_at"), low=1)
    if zero <= full:
        raise ValueError(f"turn_budget: zero_at ({zero}) must be above max_turns ({full})")


@builtin("turn_budget", kind="rule", bounded=True, check=_check_turn_budget)
def turn_budget(rollout: Rollout, max_turns: int = 1, zero_at: int = 10) -> dict[str, float]:
    """1.0 up to max_turns assistant turns, falling linearly to 0.0 at zero_at turns."""
    made = turns(rollout)
    count = len(made)
    if rollout.truncated or not any(t.text.strip() or t.tool_calls for t in made):
        reward = 0.0  # cut at the length limit, or nothing said or done: no budget kept
    elif count <= max_turns:
        reward = 1.0
    elif count >= zero_at:
        reward = 0.0
    else:
        reward = (zero_at - count) / (zero_at - max_turns)
    return {"reward": reward, "turns": float(count)}


# -- workspace_files

def _paths(value: Any, reward: str, key: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, Sequence) or \
            not all(isinstance(item, str) for item in value):
        raise ValueError(f"{reward}: {key} must be a list of paths (strings), got {value!r}")
    return list(value)


def _check_workspace_files(params: Mapping[str, Any]) -> None:
    if params.get("allowed") is None:
        raise ValueError("workspace_files: give allowed, the files the agent may write (glob "
                         "patterns, e.g. [answer.txt]; [] when it may write none)")
    _paths(params.get("allowed"), "workspace_files", "allowed")
    _paths(params.get("required"), "workspace_files", "required")
    if params.get("mode") not in MODES:
        raise ValueError(f"workspace_files: mode must be one of {', '.join(MODES)}, "
                         f"not {params.get('mode')!r}")
    tools = params.get("write_tools")
    if tools is not None and (not isinstance(tools, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in tools.items())):
        raise ValueError("workspace_files: write_tools must map tool names to the argument "
                         f"holding the path, got {tools!r}")
    if not isinstance(params.get("files_key"), str):
        raise ValueError("workspace_files: files_key must be a metadata key (a string)")


def _normal(path: str) -> str:
    text = path.strip().replace("\\", "/")
    if not text:
        return "<empty path>"
    normal = posixpath.normpath(text)
    return normal[2:] if normal.startswith("./") else normal


def _leaves(path: str) -> bool:
    return path.startswith("/") or path == ".." or path.startswith("../")


def _written(rollout: Rollout, files_key: str, write_tools: Mapping[str, str]) -> list[str]:
    if files_key in rollout.metadata:
        return _paths(rollout.metadata[files_key], "workspace_files", f"metadata.{files_key}")
    out = []
    for name, arguments in _calls_made(rollout):
        if name in write_tools:
            value = arguments.get(write_tools[name]) if isinstance(arguments, Mapping) else None
            out.append(value if isinstance(value, str) else "<not a path>")
    return out


@builtin("workspace_files", kind="rule", bounded=True, check=_check_workspace_files)
def workspace_files(rollout: Rollout, allowed: Any = None, required: Any = None,
                    mode: str = "all", files_key: str = "files_written",
                    write_tools: Any = None) -> dict[str, float]:
    """The files the agent wrote are within the allowed list (and include the required ones)."""
    patterns = [_normal(p) for p in _paths(allowed, "workspace_files", "allowed")]
    needed = {_normal(p) for p in _paths(required, "workspace_files", "required")}
    tools = DEFAULT_WRITE_TOOLS if write_tools is None else dict(write_tools)
    written = list(dict.fromkeys(_normal(p) for p in _written(rollout, files_key, tools)))

    def inside(path: str) -> bool:
        if _leaves(path) and path not in patterns:
            return False
        return any(fnmatch.fnmatchcase(path, pattern) for pattern in patterns)

    outside = sum(1 for path in written if not inside(path))
    missing = len(needed - set(written))
    if missing:
        reward = 0.0
    elif not written:
        reward = 1.0
    elif mode == "all":
        reward = 1.0 if outside == 0 else 0.0
    else:
        reward = (len(written) - outside) / len(written)
    return {"reward": reward, "files_written": float(len(written)), "outside": float(outside),
            "missing_required": float(missing)}
