"""The environment-variables page: every variable the package reads, found in its syntax tree.

A read is ``os.environ.get(K)``, ``os.environ[K]``, ``os.getenv(K)`` or ``K in os.environ``.
``K`` is a string literal or a module-level string constant (``ENV_RUBRIC = "REWARDSMITH_..."``,
also imported from another module). A read whose name is only known at run time (a judge's
``api_key_env``) is listed by module.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from reference_text import ENVIRONMENT, ENVIRONMENT_BY_USER_NAME

SOURCE = Path(__file__).resolve().parent.parent / "src" / "rewardsmith"


@dataclass
class EnvReads:
    by_name: dict[str, list[str]] = field(default_factory=dict)  # name -> ["module:line", ...]
    by_user_name: dict[str, list[str]] = field(default_factory=dict)  # module -> [lines]


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_environ(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == "environ" and isinstance(node.value, ast.Name) and node.value.id == "os"
    return isinstance(node, ast.Name) and node.id == "environ"


def _read_key(node: ast.AST) -> ast.AST | None:
    """The key expression when ``node`` reads the environment, else None."""
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "get" and _is_environ(func.value):
            return node.args[0]
        if isinstance(func, ast.Attribute) and func.attr == "getenv" and \
                isinstance(func.value, ast.Name) and func.value.id == "os":
            return node.args[0]
        if isinstance(func, ast.Name) and func.id == "getenv":
            return node.args[0]
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and \
            _is_environ(node.value):
        return node.slice
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and \
            isinstance(node.ops[0], (ast.In, ast.NotIn)) and _is_environ(node.comparators[0]):
        return node.left
    return None


def _string_constants(tree: ast.Module) -> dict[str, str]:
    found = {}
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        if targets and isinstance(value, ast.Constant) and isinstance(value.value, str):
            for target in targets:
                if isinstance(target, ast.Name):
                    found[target.id] = value.value
    return found


def find_env_reads(root: Path = SOURCE) -> EnvReads:
    trees = {path: ast.parse(path.read_text(encoding="utf-8"), str(path))
             for path in sorted(root.rglob("*.py"))}
    shared: dict[str, set[str]] = {}  # constant name -> its values anywhere in the package
    local: dict[Path, dict[str, str]] = {}
    for path, tree in trees.items():
        local[path] = _string_constants(tree)
        for name, value in local[path].items():
            shared.setdefault(name, set()).add(value)
    reads = EnvReads()
    for path, tree in trees.items():
        module = _module_name(path, root)
        for node in ast.walk(tree):
            key = _read_key(node)
            if key is None:
                continue
            where = f"{module}:{getattr(node, 'lineno', 0)}"
            names: set[str] = set()
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                names = {key.value}
            elif isinstance(key, ast.Name) and key.id in local[path]:
                names = {local[path][key.id]}
            elif isinstance(key, (ast.Name, ast.Attribute)):
                constant = key.id if isinstance(key, ast.Name) else key.attr
                names = shared.get(constant, set())
            if names:
                for name in names:
                    reads.by_name.setdefault(name, []).append(where)
            else:
                reads.by_user_name.setdefault(module, []).append(where)
    return reads


def environment_page(header: str, cell: Callable[[str], str]) -> str:
    reads = find_env_reads()
    undocumented = sorted(set(reads.by_name) - set(ENVIRONMENT))
    undocumented += sorted(f"a variable named at run time in {m}"
                           for m in set(reads.by_user_name) - set(ENVIRONMENT_BY_USER_NAME))
    if undocumented:
        raise ValueError("environment variables read in src/ without a description (add them "
                         "to scripts/reference_text.py): " + ", ".join(undocumented))
    gone = sorted(set(ENVIRONMENT) - set(reads.by_name))
    gone += sorted(set(ENVIRONMENT_BY_USER_NAME) - set(reads.by_user_name))
    if gone:  # never printed in the page, so a warning, not a failure
        print("gen_reference: warning: scripts/reference_text.py describes environment "
              "variables the source does not read: " + ", ".join(gone), file=sys.stderr)
    out = [header, "# Environment variables reference\n\n",
           "Every environment variable rewardsmith reads, found in its source (`os.environ` and "
           "`os.getenv` reads), with where it is read.\n\n",
           "| variable | meaning | read in |\n|---|---|---|\n"]
    for name in sorted(reads.by_name):
        modules = sorted({w.split(":")[0] for w in reads.by_name[name]})
        out.append(f"| `{name}` | {cell(ENVIRONMENT[name])} | "
                   + ", ".join(f"`{m}`" for m in modules) + " |\n")
    out += ["\n## Variables you name\n\n",
            "These are read under a name you choose in a rubric or on the command line.\n\n",
            "| where the name is given | what the variable holds | read in |\n|---|---|---|\n"]
    for module in sorted(reads.by_user_name):
        text = ENVIRONMENT_BY_USER_NAME[module]
        given, _, holds = text.partition(": ")
        out.append(f"| {cell(given)} | {cell(holds)} | `{module}` |\n")
    return "".join(out).rstrip() + "\n"
