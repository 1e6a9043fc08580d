"""The layout and import rules of both distributions: the library (``src/chunkwise``) and
the tools (``tools/src/chunkwise_tools``: the command line, the emulator, bench).

Checked by walking every module's imports with :mod:`ast`, function-local imports
included, so a cycle cannot hide inside a function.  The library never imports
the tools; the tools use only the library's faces (:mod:`chunkwise`,
:mod:`chunkwise.testing`, :mod:`chunkwise.lowlevel`).

In the library, the folders are the import rules (ARCHITECTURE.md, rule 1):
``_core/`` imports only the standard library, attrs and itself; an API namespace
imports the core (and, in its ``_stream`` module only, the trio layer) and never
another namespace; ``_net/`` imports the core, trio and h11.  So what is sans-IO
is read from where a module lives, not from a list kept by hand."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

import chunkwise
import chunkwise.lowlevel
import chunkwise.testing
import chunkwise_tools

SRC = Path(chunkwise.__file__).resolve().parent
TOOLS = Path(chunkwise_tools.__file__).resolve().parent
#: The faces the tools may import the library through.
LIBRARY_FACES = {
    "chunkwise",
    "chunkwise.chat",
    "chunkwise.completions",
    "chunkwise.errors",
    "chunkwise.lowlevel",
    "chunkwise.messages",
    "chunkwise.responses",
    "chunkwise.testing",
    "chunkwise.types",
}

#: The folders are the import rules (ARCHITECTURE.md, rule 1).
CORE = "chunkwise._core"  # sans-IO: the standard library, attrs and itself
NET = "chunkwise._net"  # the transport: the core, trio, h11 and ssl
#: The public namespaces, one per API: the same modules under the same names
#: (rule 6); each one's trio half is its ``_stream`` module, loaded on first use.
API_PACKAGES = (
    "chunkwise.chat",
    "chunkwise.completions",
    "chunkwise.messages",
    "chunkwise.responses",
)
API_TRIO = "_stream"
#: The sans-IO faces: what ``import chunkwise`` runs, besides the namespaces.
SANS_IO_FACES = frozenset({"chunkwise", "chunkwise.errors", "chunkwise.types"})
#: The trio layer above the transport: one stream for every API, its fan-out,
#: resuming a background response, and the client.
TRIO_LAYER = frozenset(
    {"chunkwise._stream", "chunkwise._fanout", "chunkwise._resume", "chunkwise._client"}
)
#: Every module at the top of the package; a new private module goes in a folder.
TOP_LEVEL = SANS_IO_FACES | TRIO_LAYER | {"chunkwise.__main__", "chunkwise.lowlevel"}
#: The optional OpenTelemetry extra's face, the one module that imports it.
TELEMETRY = "chunkwise.telemetry"
TOP_LEVEL |= {TELEMETRY}
#: Third-party packages the core may import: attrs at the top of a module, and
#: optional extras inside the function that uses them (with a comment, rule 4).
CORE_THIRD_PARTY = frozenset({"attrs"})
OPTIONAL_EXTRAS = frozenset({"jsonschema"})
#: Third-party packages the transport may import besides the core's: trio and h11,
#: and Python 3.10's backport of exception groups.
NET_THIRD_PARTY = CORE_THIRD_PARTY | {"trio", "h11", "exceptiongroup"}


@attrs.frozen
class Import:
    importer: str
    imported: str  # an absolute module name
    names: tuple[str, ...]  # names taken with ``from X import a, b``
    line: int
    local: bool  # inside a function
    commented: bool  # a comment on the line above says why


def module_name(path: Path) -> str:
    root = TOOLS if path.is_relative_to(TOOLS) else SRC
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    """Every module of both distributions, by name."""
    paths = sorted(SRC.rglob("*.py")) + sorted(TOOLS.rglob("*.py"))
    return {module_name(path): path for path in paths}


def resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        assert node.module is not None
        return node.module
    base = importer.split(".")
    if not is_package:
        base.pop()
    for _ in range(node.level - 1):
        base.pop()
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(name: str, path: Path) -> Iterator[Import]:
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    local_lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    local_lines.add(inner.lineno)
    # ``if TYPE_CHECKING:`` imports never run: a face names its lazy names there.
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
        ):
            for inner in node.body:
                typing_only.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found: list[tuple[str, tuple[str, ...]]] = [(alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = resolve(name, path.name == "__init__.py", node)
            names = tuple(alias.name for alias in node.names)
            # ``from . import x`` may name a submodule.
            found = [(base, names)]
            found += [(f"{base}.{n}", ()) for n in names if f"{base}.{n}" in modules()]
        else:
            continue
        above = lines[node.lineno - 2].strip() if node.lineno >= 2 else ""
        for imported, names in found:
            yield Import(
                importer=name,
                imported=imported,
                names=names,
                line=node.lineno,
                local=node.lineno in local_lines,
                commented=above.startswith("#"),
            )


ALL = [imp for name, path in modules().items() for imp in imports_of(name, path)]
INTERNAL = [imp for imp in ALL if imp.imported.split(".")[0] in ("chunkwise", "chunkwise_tools")]


def where(imp: Import) -> str:
    return f"{imp.importer}:{imp.line} imports {imp.imported}"


def top(module: str) -> str:
    return module.split(".")[0]


def within(module: str, package: str | tuple[str, ...]) -> bool:
    """``module`` is ``package`` (or one of them) or inside it (``cli`` is not in ``c``)."""
    packages = (package,) if isinstance(package, str) else package
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_the_walk_sees_the_package() -> None:
    # A walk that found nothing would pass every rule below.
    names = modules()
    assert {
        "chunkwise.lowlevel",
        "chunkwise.testing",
        "chunkwise.testing._http_server",
        "chunkwise._core.sse",
        "chunkwise._net.http11",
        "chunkwise_tools.cli",
        "chunkwise_tools.server._chat_server",
        "chunkwise_tools.bench",
    } <= set(names)
    assert any(imp.local for imp in ALL)
    assert len(INTERNAL) > 50
    assert any(top(imp.importer) == "chunkwise_tools" for imp in INTERNAL)


def test_rule_0_the_library_never_imports_the_tools() -> None:
    bad = [
        where(imp)
        for imp in ALL
        if top(imp.importer) == "chunkwise" and top(imp.imported) == "chunkwise_tools"
    ]
    assert bad == []


def test_rule_0_the_tools_import_the_library_only_through_its_faces() -> None:
    # The public modules (the faces, testing, lowlevel): never an underscore module.
    bad = [
        where(imp)
        for imp in ALL
        if top(imp.importer) == "chunkwise_tools"
        and top(imp.imported) == "chunkwise"
        and imp.imported not in LIBRARY_FACES
    ]
    assert bad == []


def test_rule_0_lowlevel_holds_only_names_without_a_public_spelling() -> None:
    # A name chunkwise exports is imported from chunkwise; lowlevel is for the rest,
    # and its docstring says why each name is there.
    public = {id(getattr(chunkwise, name)) for name in chunkwise.__all__}
    doc = chunkwise.lowlevel.__doc__ or ""
    assert [
        n for n in chunkwise.lowlevel.__all__ if id(getattr(chunkwise.lowlevel, n)) in public
    ] == []
    assert [n for n in chunkwise.lowlevel.__all__ if f"``{n}``" not in doc] == []


def stdlib(module: str) -> bool:
    return top(module) in sys.stdlib_module_names or module == "__future__"


def sans_io(module: str) -> bool:
    """The folder rule: the core, and every API namespace but its trio half."""
    package = api_package(module)
    return within(module, CORE) or (package is not None and module != f"{package}.{API_TRIO}")


def test_rule_1_every_module_lives_in_its_folder() -> None:
    # A folder's rule covers a module only if the module is in it: a private
    # module left at the top would escape both rules.
    homes = (CORE, NET, *API_PACKAGES, "chunkwise.testing")
    library = [name for name in modules() if top(name) == "chunkwise"]
    assert [name for name in library if not within(name, homes) and name not in TOP_LEVEL] == []
    assert {CORE, NET} <= set(library)


@pytest.mark.parametrize("folder", [CORE, NET])
def test_rule_1_a_folders_init_holds_its_rule_and_exports_nothing(folder: str) -> None:
    # Importing one module of a folder runs its ``__init__``: importing there
    # would load more than the module, and a name there would be a second way in.
    tree = ast.parse(modules()[folder].read_text())
    assert len(tree.body) == 1, folder
    doc = ast.get_docstring(tree) or ""
    assert "import rule" in doc.lower(), folder


def test_rule_1_the_core_imports_only_stdlib_attrs_and_itself() -> None:
    bad = [
        where(imp)
        for imp in ALL
        if within(imp.importer, CORE)
        and not (
            stdlib(imp.imported)
            or within(imp.imported, CORE)
            or top(imp.imported) in CORE_THIRD_PARTY
            # an optional extra is imported where it is used, and only there
            or (top(imp.imported) in OPTIONAL_EXTRAS and imp.local)
        )
    ]
    assert bad == []


def test_rule_1_opentelemetry_is_imported_only_when_asked_for() -> None:
    # By chunkwise.telemetry, inside instrument(): the core calls the objects it made.
    found = [imp for imp in ALL if top(imp.imported) == "opentelemetry"]
    assert [where(imp) for imp in found if imp.importer != TELEMETRY or not imp.local] == []
    assert found
    # The face itself imports only the core besides.
    assert [
        where(imp)
        for imp in ALL
        if imp.importer == TELEMETRY
        and not (stdlib(imp.imported) or within(imp.imported, CORE) or imp in found)
    ] == []


def test_rule_1_the_transport_imports_only_the_core_trio_and_h11() -> None:
    # Never an API namespace, nor the stream above it: the transport carries
    # bytes and knows no API.
    bad = [
        where(imp)
        for imp in ALL
        if within(imp.importer, NET)
        and not (
            stdlib(imp.imported)
            or within(imp.imported, (CORE, NET))
            or top(imp.imported) in NET_THIRD_PARTY
        )
    ]
    assert bad == []


def test_rule_1_an_api_namespace_imports_the_core_and_in_its_stream_the_trio_layer() -> None:
    # Its own modules and the core; its trio half (``_stream``) also the
    # transport and the trio layer.  Never another namespace.
    bad = []
    for imp in ALL:
        package = api_package(imp.importer)
        if package is None:
            continue
        allowed = (
            stdlib(imp.imported)
            or top(imp.imported) in CORE_THIRD_PARTY
            or within(imp.imported, (CORE, package))
        )
        if imp.importer == f"{package}.{API_TRIO}":
            allowed = allowed or (
                within(imp.imported, NET)
                or imp.imported in TRIO_LAYER
                or top(imp.imported) == "trio"
            )
        if not allowed:
            bad.append(where(imp))
    assert bad == []


def test_rule_1_the_sans_io_faces_import_only_the_core_and_the_namespaces() -> None:
    # ``import chunkwise`` (and ``.errors``, ``.types``) runs the core and each
    # namespace's sans-IO half, and nothing else: the trio layer is lazy.
    bad = [
        where(imp)
        for imp in ALL
        if imp.importer in SANS_IO_FACES
        and not (stdlib(imp.imported) or imp.imported in SANS_IO_FACES or sans_io(imp.imported))
    ]
    assert bad == []
    # The same, counting what those import in turn.
    graph = import_graph()
    seen: set[str] = set()
    todo = list(SANS_IO_FACES)
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    assert sorted(name for name in seen if not (sans_io(name) or name in SANS_IO_FACES)) == []
    assert {f"{CORE}.sse", f"{CORE}.endpoint", "chunkwise.chat.parser"} <= seen


def test_rule_1_no_sans_io_module_imports_trio_when_run() -> None:
    # The rules above read the source; this runs it, so an import the walk
    # cannot see (``importlib``) is caught too.
    names = sorted(name for name in modules() if sans_io(name) or name in SANS_IO_FACES)
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in ('trio', 'h11') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
    assert len(names) > 30


CLI = "chunkwise_tools.cli"
SERVER = "chunkwise_tools.server"
BENCH = "chunkwise_tools.bench"


def test_rule_2_nothing_outside_the_cli_imports_it() -> None:
    # Besides ``python -m chunkwise_tools``; ``python -m chunkwise`` finds it as
    # the console script's entry point, without importing it (rule 0).
    bad = [
        where(imp)
        for imp in INTERNAL
        if within(imp.imported, CLI)
        and not within(imp.importer, CLI)
        and imp.importer != "chunkwise_tools.__main__"
    ]
    assert bad == []


#: The modules commands share (rule 2): _common and _options, _live, the live
#: rendering of JSON values that ``chat`` and ``demo`` both draw, and _audio, the
#: ``--audio-out`` of ``chat`` and ``inspect``.
SHARED_CLI_MODULES = (
    f"{CLI}._commands",
    f"{CLI}._common",
    f"{CLI}._options",
    f"{CLI}._live",
    f"{CLI}._audio",
)


def test_rule_2_shared_cli_modules_import_no_command() -> None:
    shared = set(SHARED_CLI_MODULES)
    bad = [
        where(imp)
        for imp in INTERNAL
        if imp.importer in shared and within(imp.imported, CLI) and imp.imported not in shared
    ]
    assert bad == []


def test_rule_2_no_command_imports_another() -> None:
    # The root imports the commands; a command shares code only through
    # the shared modules, so commands can be read (and removed) one by one.
    commands = {name for name in modules() if within(name, CLI) and name != CLI} - set(
        SHARED_CLI_MODULES
    )
    bad = [where(imp) for imp in INTERNAL if imp.importer in commands and imp.imported in commands]
    assert bad == []


def test_rule_3_the_emulator_and_bench_import_no_command() -> None:
    # The commands stand on them, never the other way round; bench and the
    # emulator do not import each other either.
    bad = [
        where(imp)
        for imp in INTERNAL
        if (within(imp.importer, SERVER) and within(imp.imported, (CLI, BENCH)))
        or (within(imp.importer, BENCH) and within(imp.imported, (CLI, SERVER)))
    ]
    assert bad == []


def test_rule_3_testing_is_a_face_over_its_own_modules() -> None:
    # Generic test support only: its private modules, plus _core.names for the one
    # metadata fix-up every public face applies.
    bad = [
        where(imp)
        for imp in INTERNAL
        if imp.importer == "chunkwise.testing"
        and not within(imp.imported, "chunkwise.testing")
        and imp.imported != "chunkwise._core.names"
    ]
    assert bad == []


def parents(module: str) -> Iterator[str]:
    """The packages Python imports (runs the ``__init__`` of) before ``module``."""
    parts = module.split(".")
    for end in range(1, len(parts)):
        yield ".".join(parts[:end])


def import_graph() -> dict[str, set[str]]:
    """Who imports whom; importing ``a.b.c`` also runs ``a`` and ``a.b`` first."""
    graph: dict[str, set[str]] = {name: set() for name in modules()}
    for imp in INTERNAL:
        for imported in (*parents(imp.imported), imp.imported):
            # A module of a package does not run its package's ``__init__`` again.
            if imported in graph and not within(imp.importer, imported):
                graph[imp.importer].add(imported)
    return graph


def test_rule_4_no_import_cycle() -> None:
    graph = import_graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 visiting, 2 done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert cycles == []


def test_rule_4_function_local_imports_say_why() -> None:
    bad = [where(imp) for imp in ALL if imp.local and not imp.commented]
    assert bad == []


def test_rule_5_no_module_takes_another_modules_underscore_names() -> None:
    bad = [
        f"{where(imp)} name {name}"
        for imp in INTERNAL
        for name in imp.names
        if name.startswith("_") and not name.startswith("__") and imp.imported != imp.importer
    ]
    assert bad == []


def _own_underscore_names(tree: ast.AST) -> set[str]:
    """The underscore names a module defines: functions, classes, and attributes it sets."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)  # set on its own objects, not poked into another's
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return {name for name in names if name.startswith("_") and not name.startswith("__")}


def _inherited_underscore_names(name: str, tree: ast.Module) -> set[str]:
    """The underscore names a module's classes inherit from classes of other modules.

    A subclass using what its base class defines (``self._cache`` of a
    ``ChunkAccumulator``) is not reaching into another module's object.
    """
    imported = {
        taken: imp.imported for imp in INTERNAL if imp.importer == name for taken in imp.names
    }
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for base in node.bases:
            if isinstance(base, ast.Subscript):  # Base[T, U]
                base = base.value
            if not isinstance(base, ast.Name) or base.id not in imported:
                continue
            module = imported[base.id]
            base_tree = ast.parse(modules()[module].read_text())
            names |= _class_underscore_names(base_tree, base.id)
            names |= _inherited_underscore_names(module, base_tree)
    return names


def _class_underscore_names(tree: ast.Module, class_name: str) -> set[str]:
    """What class ``class_name`` of ``tree`` defines, and the bases it has in the same module."""
    names: set[str] = set()
    for found in ast.walk(tree):
        if isinstance(found, ast.ClassDef) and found.name == class_name:
            names |= _own_underscore_names(found)
            for base in found.bases:
                if isinstance(base, ast.Subscript):  # Base[T]
                    base = base.value
                if isinstance(base, ast.Name) and base.id != class_name:
                    names |= _class_underscore_names(tree, base.id)
    return names


def test_rule_5_a_subclass_may_use_what_its_base_class_defines() -> None:
    # The exception above is what lets both chunk accumulators share one base.
    tree = ast.parse(modules()["chunkwise.chat.accumulator"].read_text())
    inherited = _inherited_underscore_names("chunkwise.chat.accumulator", tree)
    assert {"_anomaly", "_cache", "_choices", "_finish_reason"} <= inherited
    assert "_identifier" not in inherited  # the base module's, not the base class's
    # And through a base's own base in its module (TypedEventAccumulator's BaseAccumulator).
    tree = ast.parse(modules()["chunkwise.messages.accumulator"].read_text())
    assert "_take_timings" in _inherited_underscore_names("chunkwise.messages.accumulator", tree)


def test_rule_5_no_module_uses_another_modules_underscore_attributes() -> None:
    # ``obj._name`` where the module never defines ``_name`` itself (nor a base
    # class of its own inherits it): reaching into another module's object (as
    # ``parser._decoder._pairs = True`` did).
    bad = []
    for name, path in sorted(modules().items()):
        tree = ast.parse(path.read_text())
        own = _own_underscore_names(tree) | _inherited_underscore_names(name, tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and node.attr not in own
            ):
                bad.append(f"{name}:{node.lineno} uses {ast.unparse(node)}")
    assert bad == []


#: Private attributes of trio's and ssl's objects that the transport once read
#: (``SocketType._sock``, ``SSLStream._ssl_object``, ``_incoming``, ``_outgoing``).
DEPENDENCY_PRIVATES = frozenset({"_sock", "_ssl_object", "_incoming", "_outgoing"})
_ATTRIBUTE_FUNCTIONS = frozenset({"getattr", "setattr", "hasattr", "delattr"})


def dependency_privates(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Where ``tree`` reads a dependency's private attribute: ``x._sock``, ``getattr(x, "_y")``.

    An underscore name given to ``getattr`` and its kin as a string hides from
    the rule above, whoever owns the object, so every one counts.
    """
    for node in ast.walk(tree):
        private_attribute = isinstance(node, ast.Attribute) and node.attr in DEPENDENCY_PRIVATES
        private_by_name = (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _ATTRIBUTE_FUNCTIONS
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and node.args[1].value.startswith("_")
            and not node.args[1].value.startswith("__")
        )
        if private_attribute or private_by_name:
            yield getattr(node, "lineno", 0), ast.unparse(node)


def test_rule_5_nothing_reaches_into_a_dependencys_private_attributes() -> None:
    """The library reads trio, h11 and ssl through their public APIs only.

    No attribute access to trio's or ssl's private attributes, and no
    ``getattr(x, "_name")`` (or ``setattr``, ``hasattr``, ``delattr``) at all:
    a dependency's release must not be able to break chunkwise silently.
    """
    bad = [
        f"{name}:{line} uses {code}"
        for name, path in sorted(modules().items())
        for line, code in dependency_privates(ast.parse(path.read_text()))
    ]
    assert bad == []


@pytest.mark.parametrize(
    "code",
    [
        "sock = stream.socket._sock",
        "ssl_object = getattr(stream, '_ssl_object', None)",
        "stream._incoming.pending",
        "hasattr(stream, '_outgoing')",
    ],
)
def test_rule_5_the_dependency_rule_sees_each_way_in(code: str) -> None:
    # The rule above is only as good as what it recognises.
    assert list(dependency_privates(ast.parse(code)))
    assert not list(dependency_privates(ast.parse("getattr(obj, '__module__', None)")))


#: Where transport errors are converted into chunkwise's (``chunkwise._net.http``'s
#: "Where errors are converted"); ``arrivals`` only falls back when the kernel
#: refuses its stamps.  The tools (``_cli``, ``_server``) are not the library.
CONVERTERS = {"chunkwise._net.connect", "chunkwise._net.http11", "chunkwise._net.arrivals"}
TRANSPORT_EXCEPTIONS = ("OSError", "h11.", "ssl.", "socket.")


def transport_handlers(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """The ``except`` clauses of ``tree`` that name an OS, ssl, socket or h11 exception."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            caught = ast.unparse(node.type)
            names = [n.strip("() ") for n in caught.split(",")]
            if any(n == "OSError" or n.startswith(TRANSPORT_EXCEPTIONS[1:]) for n in names):
                yield node.lineno, caught


def test_rule_4_transport_errors_are_converted_in_one_place() -> None:
    """Only the modules that call trio, ssl and h11 turn their errors into chunkwise's."""
    bad = [
        f"{name}:{line} catches {caught}"
        for name, path in sorted(modules().items())
        if name not in CONVERTERS
        # the loopback test server is the other end of the wire, with its own
        # errors; the tools are programs, not the library
        and not within(name, "chunkwise.testing")
        and not within(name, "chunkwise_tools")
        for line, caught in transport_handlers(ast.parse(path.read_text()))
    ]
    assert bad == []
    assert all(within(name, NET) and name in modules() for name in CONVERTERS)
    caught = ast.parse("try:\n    pass\nexcept (trio.BrokenResourceError, OSError):\n    pass")
    assert list(transport_handlers(caught))  # the rule sees a handler it must


#: The kinds of module every API package (rule 6) holds: its sans-IO half, and
#: its trio half (``_stream``), which the package's face imports on first use.
API_MODULES = {"accumulator", "events", "parser", "results"}
#: Besides those, the state an API's accumulator keeps while a stream runs.
API_STATE = {"chunkwise.chat": {"choices"}, "chunkwise.responses": {"items"}}
#: What every API's face offers, under the same names.
API_FACE = {
    "Accumulator",
    "Event",
    "Parser",
    "Result",
    "Stream",
    "TextDelta",
    "complete",
    "open_stream",
}


def api_package(module: str) -> str | None:
    return next((package for package in API_PACKAGES if within(module, package)), None)


@pytest.mark.parametrize("package", API_PACKAGES)
def test_rule_6_every_api_package_holds_the_same_kinds_of_module(package: str) -> None:
    held = {
        name.removeprefix(package + ".") for name in modules() if name.startswith(package + ".")
    }
    assert held == API_MODULES | API_STATE.get(package, set()) | {API_TRIO}


@pytest.mark.parametrize("package", API_PACKAGES)
def test_rule_6_every_api_package_has_the_same_face(package: str) -> None:
    # The package's ``__init__`` is its face: the same names in every API, each
    # defined by the package's own modules (or the core's shared events).
    module = sys.modules[package]
    exported = set(module.__all__)
    assert exported >= API_FACE
    for name in sorted(exported):
        value = getattr(module, name)
        home = getattr(value, "__module__", package)
        # (a union of event types reports ``types``)
        assert home in (package, "chunkwise", "chunkwise.chat", "types"), (name, home)


def test_rule_6_no_api_package_reaches_another() -> None:
    # Not directly, and not through the core: the core knows no API.
    graph = import_graph()
    bad = []
    for package in API_PACKAGES:
        seen: set[str] = set()
        todo = [name for name in graph if within(name, package)]
        while todo:
            node = todo.pop()
            for nxt in graph[node]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        bad += [
            f"{package} reaches {name}"
            for name in sorted(seen)
            if api_package(name) not in (None, package)
        ]
    assert bad == []


@pytest.mark.parametrize(
    ("module", "prefix"), [(chunkwise, "chunkwise"), (chunkwise.testing, "chunkwise.testing")]
)
def test_public_names_report_their_public_module(module: object, prefix: str) -> None:
    # Aliases (``Family``, ``Batch``, ...) report typing or builtins: only what
    # chunkwise defines must name the public module.
    wrong = {
        name: module_of
        for name in module.__all__  # type: ignore[attr-defined]
        if (module_of := getattr(getattr(module, name), "__module__", None))
        and module_of.startswith("chunkwise")
        and module_of != prefix
    }
    assert wrong == {}
    assert repr(chunkwise.chat.Stream) == "<class 'chunkwise.chat.Stream'>"
    assert chunkwise.testing.ScriptedResponse.__module__ == "chunkwise.testing"


# --- the library's tests --------------------------------------------------------------------

TESTS = Path(__file__).resolve().parent
#: The library's tests that need the tools, and why.  The rest run without them.
NEEDS_THE_TOOLS = {
    # This file: the rules above hold the tools too.
    "test_architecture.py",
    # ``python -m chunkwise`` is the tools' command line (skipped without them).
    "test_main_module.py",
    # Behaviour only a real OpenAI-compatible server shows, from the emulator
    # (through helpers/emulator.py): background resumption's requests, and
    # schema-driven structured output streamed end to end.
    "client/test_resume.py",
    "client/test_live_values_end_to_end.py",
    # The two helper modules that import the tools, each named for it.
    "helpers/emulator.py",
    "helpers/cli.py",
}


def _needs_the_tools(tree: ast.AST) -> bool:
    """Imports the tools, a helper module that does, or skips without them."""
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "importorskip"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            names = [str(node.args[0].value)]
        if any(
            name.split(".")[0] == "chunkwise_tools" or name in ("helpers.emulator", "helpers.cli")
            for name in names
        ):
            return True
    return False


def test_the_library_tests_need_the_tools_only_where_listed() -> None:
    needing = {
        path.relative_to(TESTS).as_posix()
        for path in TESTS.rglob("*.py")
        if _needs_the_tools(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert needing == NEEDS_THE_TOOLS
