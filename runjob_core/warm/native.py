"""The native ``runjob`` client: build it, install it over the console script, or take it out.

``runjob`` is a Python console script, and Python's own start (~12 ms here, ~4 of it
``site``) is most of what a warm command costs beside its real work: ~13 of the ~47 ms of a
``runjob status`` at 2,000 queued jobs against ~31 ms for ``ssh host squeue`` over a
ControlMaster (issue 29 asks for 1.2x). :file:`client.c` speaks the warm protocol itself
and starts no interpreter; whenever it cannot take the warm path (see its header) it runs
the Python client (:file:`python/runjob`) in its place, so the command is the same either way.

    python -m runjob_core.warm.native install   # compile with cc, put it at <scripts>/runjob
    python -m runjob_core.warm.native ensure    # the same, unless the installed one is current
    python -m runjob_core.warm.native remove    # the Python console script back
    python -m runjob_core.warm.native status

The client has this interpreter's values compiled in (the warm socket's key, the import
path, the interpreter): the warm process rebuilds it when they changed (:func:`refresh`,
say after an editable install added a path entry). ``pip install`` of runjob-core writes the
Python console script over it again; ``./dev`` installs it after every install.
"""

from __future__ import annotations

import ast
import os
import shutil
import sys
import sysconfig
import tempfile

#: Python's variables that change its import path or its streams' encoding: with one of them set,
#: the native client runs the Python client (compiled into it as RJ_PYTHON_VARIABLES).
PYTHON_VARIABLES = (
    "PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONNOUSERSITE", "PYTHONSAFEPATH", "PYTHONPLATLIBDIR",
    "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONCOERCECLOCALE", "PYTHONLEGACYWINDOWSSTDIO",
)
#: In every native client built here, followed by its key: how it is told from a console script.
MARKER = b"runjob-native-client key="
_HERE = os.path.dirname(os.path.abspath(__file__))
_CONSOLE_SCRIPT = """#!{python}
import sys
from runjob_core.warm import main
if __name__ == '__main__':
    sys.argv[0] = sys.argv[0].removesuffix('.exe')
    sys.exit(main())
"""


class NativeError(Exception):
    """The native client cannot be installed here (no compiler, a foreign file in the way)."""


def command_path() -> str:
    """Where this interpreter's ``runjob`` command is."""
    return os.path.join(sysconfig.get_path("scripts"), "runjob")


def installed_key(path: str | None = None) -> str | None:
    """The key compiled into the native client at *path*; None when it is not one."""
    try:
        with open(path or command_path(), "rb") as file:
            data = file.read()
    except OSError:
        return None
    at = data.find(MARKER)
    return data[at + len(MARKER):at + len(MARKER) + 16].decode("ascii", "replace") if at >= 0 else None


def _c_string(value: str) -> str:
    data = value.encode("utf-8", "surrogateescape")
    return '"' + "".join(chr(b) if 32 <= b < 127 and b not in b'"\\?' else f"\\{b:03o}" for b in data) + '"'


def import_path() -> list[str]:
    """This interpreter's import path as a ``runjob`` command has it, less its script's folder:
    asked of a fresh interpreter without the variables that change it (PYTHONPATH, ...), which
    the native client leaves to the Python client (so neither pytest's nor a shell's count)."""
    from runjob_core.transport import execute

    # Python takes an empty variable for an unset one (as client.c does).
    done = execute.run([sys.executable, "-c", "import sys; print(repr(sys.path[1:]))"],
                       env={name: "" for name in PYTHON_VARIABLES})
    if done.returncode != 0:
        raise NativeError(f"{sys.executable} could not tell its import path: {done.stderr.strip()}")
    return ast.literal_eval(done.stdout)


def config_header() -> str:
    """native_config.h: this interpreter's values, as the Python client would send them."""
    from runjob_core import warm

    path = import_path()
    key = warm.key(path)
    paths = ", ".join(_c_string(entry) for entry in path)
    return "\n".join([
        "/* Written by runjob_core.warm.native for one interpreter: do not edit. */",
        f"#define RJ_KEY {_c_string(key)}",
        f"#define RJ_PYTHON {_c_string(sys.executable)}",
        f"#define RJ_SCRIPT {_c_string(os.path.join(_HERE, 'python', 'runjob'))}",
        f"static const char *const RJ_PATH[] = {{{paths}{', ' if paths else ''}NULL}};",
        f"static const char *const RJ_PYTHON_VARIABLES[] = {{{', '.join(map(_c_string, PYTHON_VARIABLES))}, NULL}};",
        f"static const char rj_marker[] __attribute__((used)) = {_c_string(MARKER.decode() + key)};",
        "",
    ])


def build(output: str) -> None:
    """Compile the client for this interpreter into *output*."""
    from runjob_core.transport import execute

    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        raise NativeError("no C compiler (cc) found: runjob stays the Python client (apt-get install gcc)")
    with tempfile.TemporaryDirectory(prefix="runjob-native-") as folder:
        with open(os.path.join(folder, "native_config.h"), "w", encoding="utf-8") as header:
            header.write(config_header())
        try:
            done = execute.run([compiler, "-O2", "-std=c11", "-Wall", "-Werror", "-I", folder,
                                "-o", output, os.path.join(_HERE, "client.c")])
        except OSError as exc:
            raise NativeError(f"cannot run the C compiler {compiler} for runjob_core/warm/client.c ({exc.strerror}):"
                              " runjob stays the Python client") from None
    if done.returncode != 0:
        raise NativeError(f"{compiler} could not build runjob_core/warm/client.c:\n{done.stderr.strip()}")


def _ours(path: str) -> bool:
    """Whether *path* is runjob's console script or a native client (nothing else is replaced)."""
    if installed_key(path) is not None:
        return True
    try:
        with open(path, encoding="utf-8") as file:
            return "from runjob_core.warm import main" in file.read(4096)
    except (OSError, UnicodeDecodeError):
        return False


def install(path: str | None = None) -> str:
    """Build the client and put it at *path* (this interpreter's ``runjob``) in one rename."""
    path = path or command_path()
    if os.path.exists(path) and not _ours(path):
        raise NativeError(f"{path} is not runjob's command: left as it is")
    temporary = f"{path}.native-{os.getpid()}"
    try:
        build(temporary)
        os.chmod(temporary, 0o755)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return path


def remove(path: str | None = None) -> str:
    """Put the Python console script back at *path*."""
    path = path or command_path()
    if installed_key(path) is None:
        return path
    temporary = f"{path}.python-{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as file:
        file.write(_CONSOLE_SCRIPT.format(python=sys.executable))
    os.chmod(temporary, 0o755)
    os.replace(temporary, path)
    return path


def refresh(current_key: str) -> bool:
    """Rebuild the installed native client when its compiled-in key is not *current_key* (the
    import path changed); True when it did. Called by the warm process, with its own key."""
    installed = installed_key()
    if installed is None or installed == current_key:
        return False
    install()
    return True


def ensure() -> str | None:
    """Install the native client unless the one installed is current (its key, and built after
    client.c and this module last changed); the path when it (re)built one."""
    from runjob_core import warm

    path = command_path()
    if installed_key(path) == warm.key(import_path()):
        built = os.stat(path).st_mtime
        if all(os.stat(os.path.join(_HERE, name)).st_mtime <= built for name in ("client.c", "native.py")):
            return None
    return install(path)


def main(argv: list[str]) -> int:
    action = argv[0] if argv else "status"
    try:
        if action == "install":
            print(f"runjob: native client installed at {install()}")
        elif action == "build" and len(argv) == 2:
            build(argv[1])  # to a path of one's own (the tests): nothing installed
        elif action == "ensure":
            built = ensure()
            if built:
                print(f"runjob: native client installed at {built}")
        elif action == "remove":
            print(f"runjob: Python console script at {remove()}")
        elif action == "status":
            key = installed_key()
            print(f"{command_path()}: " + ("Python console script" if key is None else f"native client (key {key})"))
        else:
            print("usage: python -m runjob_core.warm.native install|ensure|remove|status|build PATH", file=sys.stderr)
            return 2
    except NativeError as exc:
        print(f"runjob: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
