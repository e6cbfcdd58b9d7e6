"""What pyproject.toml cannot say: which packages, under which names, and what is compiled.

The repository keeps its rooms at the top (``router/``, ``records/``, ``tools/``, ...);
installed, they are one namespace, ``once.router``, ``once.records``, ..., because
top-level names like ``tools`` or ``records`` belong to other projects on PyPI (an
editable ``tools`` elsewhere shadowed ours). Subpackages are found, not listed, so a new
one cannot be left out of the wheel.

The data path (``COMPILED``) is compiled to C extensions by mypyc from the same typed
source, beside the ``.py`` files, which stay (``ONCE_PURE=1`` runs them: see
``records/compiled.py``). Why mypyc rather than Cython: the modules are already
``mypy --strict`` clean, so the annotations that make the C fast are the ones that are
checked; Cython's pure-Python mode would need a second set of declarations. Compiled only
by a regular install (``pip install .``): an editable install (``pip install -e .``) and
``build_ext --inplace`` build nothing, so an edit is never shadowed by an older extension
in the source tree. Without a C compiler (or with ``ONCE_PURE=1`` at build time) the
install is pure Python, and the manifest it writes says why: the router logs it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import sysconfig
from pathlib import Path

from setuptools import Distribution, find_packages, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CompileError

ROOMS = ("router", "linkstate", "records", "client", "outbox", "sim", "tools", "topologies")
ROOT = Path(__file__).resolve().parent

# The per-message modules: the AMQP engine with its codecs and frames, the records, the core,
# and the AMQP adaptor between them (its connections subclass the interpreted asyncio
# protocol: classes mypyc keeps as Python classes, their methods compiled).
COMPILED = (
    *(f"router/amqp/{m}.py" for m in ("codec", "decoder", "encoder", "errors", "frames", "performatives", "transfer",
                                      # the engine: ``Connection``, its base and its layers
                                      "connection", "connection_state", "shared", "negotiation", "sessions", "links",
                                      "deliveries", "endpoints", "events", "sasl")),
    *(str(p.relative_to(ROOT)) for p in sorted((ROOT / "records").glob("*.py")) if p.name not in ("__init__.py", "compiled.py")),
    *(str(p.relative_to(ROOT)) for p in sorted((ROOT / "router" / "core").glob("*.py")) if p.name != "__init__.py"),
    *(f"router/adaptors/amqp/{m}.py" for m in ("copies_wire", "dispositions", "edge", "interrouter", "message")),
)
MANIFEST = "once/records/compiled.json"  # (in the build: module -> sha256 of the source it was built from)


def module_name(path: str) -> str:
    return "once." + path.removesuffix(".py").replace("/", ".")


class BuildCompiled(build_ext):
    """Compile ``COMPILED`` with mypyc, or write why not: never fail the install for it."""

    def run(self) -> None:
        # (decided here, not in ``finalize_options``: pip finalizes the command while it only
        # asks an editable build for its requirements, before ``editable_mode`` is set)
        if getattr(self, "editable_mode", False) or self.inplace:
            # (nothing is written: an editable install reads the source tree, where no
            # manifest and no extension ever are)
            print("once: editable install: pure Python (compiled modules come with `pip install .`)")
            return
        reason, modules = "", {}
        if os.environ.get("ONCE_PURE", "") not in ("", "0"):  # (as at run time: records/compiled.py)
            reason = "built with ONCE_PURE set"
        else:
            try:
                _require_compiler()
                self.distribution.ext_modules = self._mypycify()
                # (setuptools prepares the extensions a command has when it is finalized:
                # a plain build_ext, finalized now, builds them, with this one's options)
                plain = build_ext(self.distribution)
                plain.parallel, plain.force, plain.debug = self.parallel, self.force, self.debug
                plain.ensure_finalized()
                _compile_in_parallel(plain)
                plain.run()
            except BaseException as e:  # (no compiler, no headers; mypyc exits on what it refuses)  # noqa: B036
                for built in Path(self.build_lib).glob("once/**/*.so"):  # (none half-built stays)
                    built.unlink()
                reason = _why(e)
            else:
                modules = {module_name(p): hashlib.sha256((ROOT / p).read_bytes()).hexdigest() for p in COMPILED}
        if reason:
            print(f"once: {reason}: the router runs as pure Python")
        out = Path(self.build_lib) / MANIFEST
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"modules": modules, "reason": reason}, indent=1) + "\n")

    def _mypycify(self) -> list:
        from mypyc.build import mypycify  # (a build requirement, pyproject.toml's [build-system])

        # mypyc names a module after its path: the rooms are staged under ``once/`` (links),
        # so that ``records/table.py`` compiles as ``once.records.table``.
        stage = ROOT / "build" / "mypyc-src"
        shutil.rmtree(stage, ignore_errors=True)
        (stage / "once").mkdir(parents=True)
        (stage / "once" / "__init__.py").write_text("")  # (for mypy's crawl only: never installed)
        for room in ROOMS:
            (stage / "once" / room).symlink_to(ROOT / room, target_is_directory=True)
        # One group: calls between the compiled modules stay native. Its shared library
        # sits inside the namespace (``once/data_path__mypyc...so``), not at the top of
        # site-packages.
        # (third-party packages are not in the build's environment: their types are Any)
        # ``multi_file``: a C file per module (one file of all of them took a 900 MB compiler
        # process 8.5 minutes on a loaded machine), compiled side by side (below).
        paths = [str(stage / "once" / p) for p in COMPILED]
        print(f"once: generating C for {len(paths)} modules with mypyc (about 20 s)", flush=True)
        target = ROOT / "build" / "mypyc"
        extensions = mypycify(["--ignore-missing-imports", *paths], opt_level="3", group_name="once.data_path",
                              target_dir=str(target), multi_file=True)
        for ext in extensions:  # (the group's headers go under once/, for a dotted group name: the
            ext.include_dirs.append(str(target / "once"))  # per-module files include them by bare name)
        return extensions


def _compile_in_parallel(command: build_ext) -> None:
    """The group is one extension of many C files: setuptools compiles an extension's files
    one after another (its ``parallel`` runs whole extensions side by side). Each file is
    its own compiler process, so they run side by side here, one per CPU, with a line
    each as it is done (``pip install -v`` shows them). Written here: no build tool we
    depend on does it."""
    from concurrent.futures import ThreadPoolExecutor

    compiler = command.compiler
    if isinstance(compiler, str) or compiler is None:
        from distutils.ccompiler import new_compiler  # (setuptools' own, as build_ext makes it)

        compiler = new_compiler(compiler=compiler)
    workers = max(1, min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8))
    cls = type(compiler)
    original = cls.compile

    def compile(self, sources, output_dir=None, macros=None, include_dirs=None, debug=0, extra_preargs=None,
                extra_postargs=None, depends=None):  # noqa: ANN001, ANN202 - distutils' own signature
        macros, objects, extra, pp_opts, build = self._setup_compile(output_dir, macros, include_dirs, sources,
                                                                     depends, extra_postargs)
        cc_args = self._get_cc_args(pp_opts, debug, extra_preargs)
        todo = [obj for obj in objects if obj in build]
        print(f"once: compiling {len(todo)} C files, {workers} at a time", flush=True)
        done = 0

        def one(obj: str) -> None:
            nonlocal done
            src, ext = build[obj]
            self._compile(obj, src, ext, cc_args, extra, pp_opts)
            done += 1
            print(f"once: [{done}/{len(todo)}] {Path(src).name}", flush=True)

        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, todo))
        return objects

    compile.original = original  # type: ignore[attr-defined]
    cls.compile = compile


def _require_compiler() -> None:
    """Fail before mypyc runs when the C compiler the build would call is not there: the
    generation alone takes about 20 s, for nothing then. (The compiler named as
    ``build_ext`` finds it: ``CC`` from the environment, else Python's own build's.)"""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    program = shlex.split(cc)[0] if cc.strip() else ""
    if not program or shutil.which(program) is None:
        raise CompileError(f"no C compiler: {program or cc!r} not found")


def _why(e: BaseException) -> str:
    first = str(e).splitlines()[0] if str(e) else ""
    return f"no compiled modules ({type(e).__name__}: {first})"


class WithCompiled(Distribution):
    def has_ext_modules(self) -> bool:  # (the extensions are only known when build_ext runs)
        return True


setup(
    packages=[f"once.{name}" for name in find_packages(include=[f"{room}*" for room in ROOMS])],
    package_dir={f"once.{room}": room for room in ROOMS},
    distclass=WithCompiled,
    cmdclass={"build_ext": BuildCompiled},
)
