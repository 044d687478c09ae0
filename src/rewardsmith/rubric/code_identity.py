"""What code a reward runs, as a fingerprint: the part of a component's identity that is code.

A stored result may be reused only while the code that made it is unchanged, and a reward's
code is more than the module that defines it:

- a built-in covers its whole home (``rewards/<home>``: the package, or the one module), every
  module of rewardsmith those files import (transitively, function-level imports included),
  the sandbox package for ``code`` (harness included), and the installed packages they import,
  by name and version (language data for ``ifeval`` ships in ``langdetect``);
- a user's reward covers its defining module and, transitively, every module it imports from
  the user's own code (anything that is neither the standard library nor an installed package);
  installed packages it imports are covered by name and version; rewardsmith modules it
  imports by name are covered as a built-in's are.

Files are named path-independently (``rewardsmith/rewards/extract.py``, ``helpers.py``,
``pkg/util.py``), so a moved project or a copied install keeps its identity; contents are
hashed, not dates. Imports are read from the source (``ast``) without running anything;
imports under ``if TYPE_CHECKING:`` are skipped, and a name built at run time
(``importlib.import_module(name)``) cannot be seen. Within one process a file is read and
parsed again only when its size, modification time or inode changed, so a second rubric load
costs a ``stat`` per file.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.machinery
import importlib.util
import inspect
import marshal
import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["CodeIdentity", "code_identity", "changed_code"]

_PACKAGE = "rewardsmith"
_ROOT = Path(os.path.abspath(__file__)).parent.parent  # this rewardsmith's folder, as imported
# Homes whose verdicts depend on more than they import: the sandbox runs ``code``'s programs
# with a harness it reads as text, and an agent's workspace with a runner read as text.
_EXTRA_PACKAGES = {"code": ("sandbox",), "agents": ("sandbox",)}
_DIGEST = 6  # bytes of a file's content hash kept in a run's record (12 hex digits)


@dataclass(frozen=True)
class CodeIdentity:
    """The code behind a reward: ``files`` (name -> content hash), ``packages`` (installed
    distribution or module -> version) and ``digest`` over both and the function's name."""

    digest: str
    files: dict[str, str] = field(default_factory=dict)
    packages: dict[str, str] = field(default_factory=dict)

    def record(self) -> dict[str, str]:
        """Files and packages in one mapping, as a run stores them (packages as ``pkg==``)."""
        out = dict(self.files)
        out.update({f"{name}==": version for name, version in self.packages.items()})
        return out


def changed_code(before: dict[str, str], now: dict[str, str]) -> list[str]:
    """What differs between two ``CodeIdentity.record()`` mappings, for a person to read:
    ``helpers.py`` (edited), ``+ new.py``, ``- gone.py``, ``numpy 1.26.4 -> 2.0.0``."""
    out = []
    for name in sorted(set(before) | set(now)):
        old, new = before.get(name), now.get(name)
        if old == new:
            continue
        if name.endswith("=="):
            out.append(f"{name[:-2]} {old or 'none'} -> {new or 'none'}")
        elif old is None:
            out.append(f"+ {name}")
        elif new is None:
            out.append(f"- {name}")
        else:
            out.append(name)
    return out


def code_identity(func: Callable[..., Any]) -> CodeIdentity:
    """The fingerprint of everything ``func`` runs (see the module's docstring)."""
    parts = getattr(func, "__rewardsmith_source_parts__", None) or (func,)
    walk = _Walk()
    names: list[Any] = []
    for part in parts:
        target, bound = _target(part)
        names.append([_qualified_name(target), bound])
        module = inspect.getmodule(target)
        path = _source_file(module)
        if module is None or path is None:
            names.append(_code_text(target))  # no file (built in, made at run time): its code
            continue
        walk.start(module.__name__, path)
    walk.run()
    digest = hashlib.blake2b(digest_size=12)
    digest.update(repr(names).encode("utf-8", "surrogatepass"))
    for name, value in sorted(walk.files.items()):
        digest.update(f"\0f{name}\0{value}".encode("utf-8", "surrogatepass"))
    for name, value in sorted(walk.packages.items()):
        digest.update(f"\0p{name}\0{value}".encode("utf-8", "surrogatepass"))
    return CodeIdentity(digest.hexdigest(), dict(sorted(walk.files.items())),
                        dict(sorted(walk.packages.items())))


# ------------------------------------------------------------------ the walk over imports


class _Walk:
    """Files to hash and follow, from the reward's own modules outwards."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.packages: dict[str, str] = {}
        self._seen: set[Path] = set()
        self._todo: list[tuple[str, Path]] = []

    def start(self, module_name: str, path: Path) -> None:
        inside = _inside_package(path)
        if inside is not None:
            home = _home_of(inside)
            if home is not None:  # a built-in: its whole home, and what else it depends on
                self._add_tree(_ROOT / "rewards" / home)
                for package in _EXTRA_PACKAGES.get(home.removesuffix(".py"), ()):
                    self._add_tree(_ROOT / package)
        self._todo.append((module_name, path))

    def _add_tree(self, where: Path) -> None:
        for path in _tree(where):
            if path.suffix == ".py":
                self._todo.append((_module_of(path), path))
            else:  # data shipped beside the code
                self._note(path, _parsed_file(path)[0])

    def run(self) -> None:
        while self._todo:
            module_name, path = self._todo.pop()
            path = Path(os.path.abspath(path))
            if path in self._seen:
                continue
            self._seen.add(path)
            digest, imports = _parsed_file(path)
            self.files[_label(module_name, path)] = digest
            package = module_name if path.name == "__init__.py" else module_name.rpartition(".")[0]
            for level, base, names in imports:
                for name in _absolute_names(level, base, names, package):
                    self._follow(name)

    def _follow(self, name: str) -> None:
        top = name.partition(".")[0]
        if not top or top in sys.stdlib_module_names or top in sys.builtin_module_names \
                or top == "__future__":
            return
        if top == _PACKAGE:
            path = _package_file(name)
            if path is not None and name != _PACKAGE:  # the facade only re-exports
                self._todo.append((name, path))
            return
        path, installed = _locate(name)
        if path is None:
            if "." not in name and name not in sys.modules and _absent(name):
                self.packages[top] = "not found"  # installing it later changes the identity
            return
        if installed is not None:
            self.packages.update(installed)
            return
        self._todo.append((name, path))

    def _note(self, path: Path, digest: str) -> None:
        self.files[_label(_module_of(path), path)] = digest


def _absolute_names(level: int, base: str | None, names: Iterable[str],
                    package: str) -> list[str]:
    """The modules one import statement may load: the base, and each name as a submodule."""
    if level:
        parts = package.split(".") if package else []
        if level - 1 > len(parts):
            return []
        anchor = ".".join(parts[: len(parts) - (level - 1)])
        base = f"{anchor}.{base}" if base and anchor else (base or anchor)
    if not base:
        return []
    out = [base]
    out.extend(f"{base}.{name}" for name in names if name != "*")
    return out


# ------------------------------------------------------------------ files and where they are


def _inside_package(path: Path) -> Path | None:
    """``path`` relative to this rewardsmith's folder, or None when it lies elsewhere."""
    try:
        return Path(os.path.abspath(path)).relative_to(_ROOT)
    except ValueError:
        return None


@functools.lru_cache(maxsize=64)
def _tree(where: Path) -> tuple[Path, ...]:
    """The files of a package folder (or the one module), listed once per process: caches and
    an editor's hidden files are not code."""
    if where.is_file():
        return (where,)
    return tuple(path for path in sorted(where.rglob("*"))
                 if "__pycache__" not in path.parts and not path.name.startswith(".")
                 and path.is_file())


def _home_of(relative: Path) -> str | None:
    """A built-in's home: the entry of ``rewards/`` that holds it (``mathanswer``,
    ``answers.py``), or None for a module outside ``rewards/``."""
    parts = relative.parts
    if len(parts) < 2 or parts[0] != "rewards" or parts[1].startswith("_"):
        return None
    return parts[1]


def _module_of(path: Path) -> str:
    relative = _inside_package(path)
    if relative is None:
        return path.stem
    parts = [_PACKAGE, *relative.with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.lru_cache(maxsize=4096)
def _package_file(name: str) -> Path | None:
    """The file of module ``name`` inside this rewardsmith, found on disk (nothing imported)."""
    relative = _ROOT.joinpath(*name.split(".")[1:])
    for candidate in (relative / "__init__.py", relative.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _label(module_name: str, path: Path) -> str:
    """A file's name in a fingerprint: its path in its package, not where it lies on disk."""
    relative = _inside_package(path)
    if relative is not None:
        return f"{_PACKAGE}/{relative.as_posix()}"
    if module_name.startswith("rewardsmith_user_") or "." not in module_name \
            and path.name != "__init__.py":
        return path.name  # a reward file, or a top-level module beside it
    return "/".join(module_name.split(".")) + ("/__init__.py" if path.name == "__init__.py"
                                                else path.suffix)


def _source_file(module: ModuleType | None) -> Path | None:
    filename = getattr(module, "__file__", None)
    if not filename:
        return None
    path = Path(filename)
    if path.suffix == ".pyc":
        source = importlib.util.source_from_cache(filename) if "__pycache__" in filename \
            else filename[:-1]
        path = Path(source)
    return path if path.is_file() else None


_LOCATED: dict[str, tuple[Path, dict[str, str] | None]] = {}


def _locate(name: str) -> tuple[Path | None, dict[str, str] | None]:
    """Where module ``name`` is, and for an installed one its distribution and version.

    What is imported already is where Python found it; anything else is looked up on
    ``sys.path`` without running it (a dotted name walks its packages' folders). Found
    modules are remembered for the process; a missing one is looked for again next time."""
    known = _LOCATED.get(name)
    if known is not None:
        return known
    module = sys.modules.get(name)
    path = _source_file(module) if module is not None else None
    if path is None:
        path = _find_on_path(name)
    if path is None:
        return None, None
    site = _site_folder(path)
    top = name.partition(".")[0]
    found = (path, None if site is None else {top: _installed_version(site, top, path)})
    _LOCATED[name] = found
    return found


def _absent(name: str) -> bool:
    """True when no top-level module ``name`` can be imported (a namespace package, which has
    no file of its own, is present)."""
    try:
        return importlib.machinery.PathFinder.find_spec(name) is None
    except (ImportError, ValueError, OSError):
        return True


def _find_on_path(name: str) -> Path | None:
    search: list[str] | None = None
    spec = None
    for part in name.split("."):
        try:
            spec = importlib.machinery.PathFinder.find_spec(part, search)
        except (ImportError, ValueError, OSError):
            return None
        if spec is None:
            return None
        search = list(spec.submodule_search_locations or [])
    if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        return None
    origin = Path(spec.origin)
    return origin if origin.is_file() else None


def _site_folder(path: Path) -> Path | None:
    """The site-packages (or dist-packages) folder holding ``path``, when it is installed."""
    for parent in path.resolve().parents:
        if parent.name in ("site-packages", "dist-packages"):
            return parent
    return None


@functools.lru_cache(maxsize=256)
def _installed_version(site: Path, top: str, path: Path) -> str:
    """``dist==version`` of the distribution that installed module ``top``, read from the
    ``*.dist-info`` folders beside it (their names carry the version); the hash of the
    module's file when no distribution claims it."""
    infos = _dist_infos(site)
    wanted = _normalize(top)
    for dist, version, _folder in infos:
        if dist == wanted:
            return f"{dist}=={version}"
    # A distribution named otherwise: its top_level.txt names the module, or failing that its
    # RECORD lists the module's files (searched as text: RECORDs run to thousands of lines).
    for listing in ("top_level.txt", "RECORD"):
        for dist, version, folder in infos:
            text = _read(folder / listing)
            if text is None:
                continue
            if listing == "top_level.txt":
                found = top in text.split()
            else:
                text = "\n" + text
                found = f"\n{top}/" in text or f"\n{top}.py," in text or f"\n{top}." in text
            if found:
                return f"{dist}=={version}"
    return f"unversioned:{_file_digest(path)}"


@functools.lru_cache(maxsize=16)
def _dist_infos(site: Path) -> list[tuple[str, str, Path]]:
    out: list[tuple[str, str, Path]] = []
    try:
        entries = list(os.scandir(site))
    except OSError:
        return out
    for entry in entries:
        if entry.name.endswith(".dist-info") and "-" in entry.name:
            dist, _, version = entry.name[: -len(".dist-info")].partition("-")
            out.append((_normalize(dist), version, Path(entry.path)))
    return sorted(out)


def _normalize(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


# ------------------------------------------------------------------ reading and parsing


_FILES: dict[Path, tuple[tuple[int, int, int], str, Imports]] = {}


def _parsed_file(path: Path) -> tuple[str, Imports]:
    """A file's content hash and imports, read again only when its size, modification time or
    inode changed since this process last read it."""
    try:
        found = os.stat(path)
    except OSError:
        return "unreadable", ()
    state = (found.st_mtime_ns, found.st_size, found.st_ino)
    known = _FILES.get(path)
    if known is not None and known[0] == state:
        return known[1], known[2]
    text = _read(path)
    if text is None:
        return "unreadable", ()
    digest, imports = _parsed(text, path.suffix == ".py")
    _FILES[path] = (state, digest, imports)
    return digest, imports


def _read(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", "surrogateescape")
    except OSError:
        return None


def _file_digest(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return "unreadable"
    return hashlib.blake2b(data, digest_size=_DIGEST).hexdigest()


Imports = tuple[tuple[int, str | None, tuple[str, ...]], ...]


@functools.lru_cache(maxsize=4096)
def _parsed(text: str, is_python: bool) -> tuple[str, Imports]:
    """A file's content hash and the imports in it: (level, module, names) per statement.

    Only the statements that start with ``import`` or ``from`` are parsed (a whole module's
    syntax tree costs a hundred times more); a docstring line that reads as an import adds a
    module to follow, never loses one."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogateescape"),
                             digest_size=_DIGEST).hexdigest()
    if not is_python:
        return digest, ()
    found: list[tuple[int, str | None, tuple[str, ...]]] = []
    skipped = _type_checking_blocks(text)
    for match in _IMPORT.finditer(text):
        if any(start <= match.start() < end for start, end in skipped):
            continue
        try:
            tree = ast.parse(_statement(text, match.end()).strip())
        except (SyntaxError, ValueError):
            continue
        for node in tree.body:
            if isinstance(node, ast.Import):
                found.extend((0, alias.name, ()) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                found.append((node.level, node.module, tuple(a.name for a in node.names)))
    return digest, tuple(found)


_IMPORT = re.compile(r"^[ \t]*(?=(?:from[ \t]+\.*[\w.]*[ \t]+import|import[ \t]+\w))", re.M)
_TYPE_CHECKING = re.compile(r"^([ \t]*)if[ \t]+(?:typing\.)?TYPE_CHECKING[ \t]*:[ \t]*(?:#.*)?$",
                            re.M)


def _statement(text: str, start: int) -> str:
    """The import statement that starts at ``start``: to the end of its line, or of its
    parentheses or backslash continuations."""
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    line = text[start:end]
    code = line.partition("#")[0]
    if "(" in code and ")" not in code:
        close = text.find(")", end)
        return text[start: len(text) if close < 0 else close + 1]
    while line.rstrip().endswith("\\") and end < len(text):
        following = text.find("\n", end + 1)
        end = len(text) if following < 0 else following
        line = text[start:end]
    return line.replace("\\\n", " ")


def _type_checking_blocks(text: str) -> list[tuple[int, int]]:
    """Spans of ``if TYPE_CHECKING:`` bodies (imports there never run)."""
    spans = []
    for match in _TYPE_CHECKING.finditer(text):
        indent = len(match.group(1).expandtabs())
        position = match.end() + 1
        end = position
        while position < len(text):
            newline = text.find("\n", position)
            newline = len(text) if newline < 0 else newline
            line = text[position:newline]
            if line.strip() and len(line) - len(line.lstrip()) <= indent:
                break
            end = position = newline + 1
        spans.append((match.start(), end))
    return spans


# ------------------------------------------------------------------ functions without files


def _target(part: Any) -> tuple[Any, str]:
    """The function behind ``part`` (unwrapped; a partial's function) and what is bound."""
    bound = ""
    while isinstance(part, functools.partial):
        bound += repr((part.args, sorted(part.keywords.items())))
        part = part.func
    return inspect.unwrap(part), bound


def _qualified_name(target: Any) -> str:
    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    module = getattr(target, "__module__", None) or "?"
    if isinstance(module, str) and module.startswith("rewardsmith_user_"):
        module = "rewardsmith_user"  # a file reward's module name carries its folder's hash
    return f"{module}:{name}"


def _code_text(target: Any) -> str:
    try:
        return inspect.getsource(target)
    except (OSError, TypeError):
        code = getattr(target, "__code__", None)
        try:
            return marshal.dumps(code).hex() if code is not None else type(target).__name__
        except ValueError:  # a constant marshal cannot write
            return repr(code.co_code) if code is not None else type(target).__name__
