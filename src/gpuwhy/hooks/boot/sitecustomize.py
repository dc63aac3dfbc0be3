"""gpuwhy's start-up hook for jobs under `gpuwhy run` (this folder leads the job's PYTHONPATH).

At interpreter start, when `GPUWHY_SOCKET` is set and `GPUWHY_BOOT` is not "0", it puts a tiny
import watcher in `sys.meta_path` and nothing else: no gpuwhy module and no framework is
imported here (a fraction of a millisecond). When the job first imports a watched framework,
the watcher loads gpuwhy's hooks — this gpuwhy, even if the job's interpreter has none
installed — connects to the socket and hands over to `gpuwhy.hooks.auto`. Then the next
`sitecustomize` on `sys.path` (the user's, or the distribution's) runs, as if this one were not
here.
"""

import os
import sys

# Only modules every interpreter has loaded before `site` runs are used at start-up: no
# `typing`, no `importlib.util`, no `__future__` (each would cost a millisecond or more).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

_HERE = os.path.dirname(os.path.abspath(__file__))
# gpuwhy.hooks.auto.FRAMEWORKS' modules (tests/hooks/test_hooks_boot.py keeps them the same).
_WATCHED = frozenset(
    {
        "keras",
        "tf_keras",
        "tensorflow",
        "torch",
        "torch._dynamo.callback",
        "lightning.pytorch",
        "pytorch_lightning",
        "transformers.trainer",
        "accelerate.data_loader",
        "jax",
    }
)
_GUARD = "GPUWHY_CHAINED_SITECUSTOMIZE"  # gpuwhy.wire.ENV_CHAINED_SITECUSTOMIZE
_OLDEST_PYTHON = (3, 10)  # pyproject.toml's requires-python


class _BootFinder:
    """Waits for the first watched import, then puts gpuwhy's own finder in its place."""

    def find_spec(
        self, fullname: str, path: "Sequence[str] | None", target: "ModuleType | None" = None
    ) -> "ModuleSpec | None":
        if fullname not in _WATCHED:
            return None  # every other import: one set lookup
        try:
            if self in sys.meta_path:
                if sys.version_info < _OLDEST_PYTHON:
                    oldest, runs = _OLDEST_PYTHON, sys.version_info
                    raise RuntimeError(
                        f"they need Python {oldest[0]}.{oldest[1]} or later; "
                        f"the job runs {runs[0]}.{runs[1]}"
                    )
                _import_own_gpuwhy()
                from gpuwhy.hooks import auto, emitter

                emitter.connect_socket(os.environ.get("GPUWHY_SOCKET", ""))
                auto.install(os.environ, replacing=self)
            from gpuwhy.hooks import auto

            finder = auto.finder()
            return finder.find_spec(fullname, path, target) if finder else None
        except Exception as error:  # never break the job's imports
            if self in sys.meta_path:
                sys.meta_path.remove(self)
                _tell_run(error)
            return None


def _tell_run(error: Exception) -> None:
    """The hooks did not load in this process: say so to `gpuwhy run` in one line of its wire
    protocol (gpuwhy.wire), so that its report says the job's phases, steps and waits are
    missing, not that the job has no problem. Never raises."""
    try:
        import json
        import socket
        import time

        reason = str(error) if isinstance(error, RuntimeError) else repr(error)
        line = {
            "t": "event",
            "ts": int(time.monotonic() * 1e9),  # (monotonic_ns: 3.7 and later)
            "kind": "hooks_unavailable",  # gpuwhy.analysis.blind_spots.HOOKS_UNAVAILABLE
            "msg": reason,
            "data": {"pid": os.getpid()},
        }
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2.0)
            sock.connect(os.environ.get("GPUWHY_SOCKET", ""))
            sock.sendall((json.dumps(line) + "\n").encode())
    except Exception:
        pass


def _import_own_gpuwhy() -> None:
    """Make `import gpuwhy` give the gpuwhy this folder belongs to (job venvs may lack it)."""
    if "gpuwhy" in sys.modules:
        return
    import importlib.util

    package = os.path.dirname(os.path.dirname(_HERE))
    spec = importlib.util.spec_from_file_location(
        "gpuwhy", os.path.join(package, "__init__.py"), submodule_search_locations=[package]
    )
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpuwhy"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["gpuwhy"]
        raise


def _boot() -> None:
    if os.environ.get("GPUWHY_SOCKET") and os.environ.get("GPUWHY_BOOT") != "0":
        sys.meta_path.insert(0, _BootFinder())


def _chain() -> None:
    """Run the next `sitecustomize` on sys.path, the way `site` would have run it."""
    if os.environ.get(_GUARD):
        return
    path_finder = sys.modules["_frozen_importlib_external"].PathFinder  # loaded at start-up
    paths = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = path_finder.find_spec("sitecustomize", paths)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = type(sys)("sitecustomize")  # types.ModuleType, without importing `types`
    module.__spec__, module.__loader__, module.__file__ = spec, spec.loader, spec.origin
    this = sys.modules.get("sitecustomize")
    sys.modules["sitecustomize"] = module
    os.environ[_GUARD] = "1"
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # as site.execsitecustomize reports it
        if this is not None:
            sys.modules["sitecustomize"] = this
        print(
            f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
            f"{type(error).__name__}: {error}",
            file=sys.stderr,
        )
    finally:
        os.environ.pop(_GUARD, None)


_boot()
_chain()
