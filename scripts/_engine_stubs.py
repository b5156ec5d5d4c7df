"""Print an engine release's ``--help`` without its heavy dependencies (child of engine_contracts.py).

Run as ``python scripts/_engine_stubs.py --engine sglang --src DIR [--stub MOD ...] -- ARGS``
with DIR holding the release's extracted Python files. torch, triton, transformers, CUDA
kernels and the HTTP stack are replaced by permissive stub modules through an import hook
(a ``sys.meta_path`` finder placed first), so the release's own argparse definitions run
as written and print the help the engine would print. A module missing for another
reason raises ``ModuleNotFoundError``; the parent then stubs it too and runs again.

Standard library only: this runs in a small venv (pydantic, msgspec, numpy, regex, ...)
that the parent builds, never in the project's environment. Checked against the
captures in tests/data/help (sglang 0.5.23, vllm 0.33.0): identical flag tables.
"""

from __future__ import annotations

import abc
import argparse
import configparser
import functools
import glob
import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata as metadata
import inspect
import os
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any, Literal

# Packages replaced by stubs: GPU stack, model and tokenizer libraries, HTTP and RPC servers.
HEAVY = frozenset(
    ["torch", "torchvision", "torchaudio", "triton", "transformers", "tokenizers", "safetensors", "huggingface_hub", "hf_transfer", "flashinfer", "sgl_kernel", "sgl_fa", "flash_attn", "deep_gemm", "deep_ep", "cutlass", "quack", "cuda", "nvidia", "pynvml", "nvtx", "torch_memory_saver", "torchao", "compressed_tensors", "xgrammar", "outlines", "llguidance", "lmformatenforcer", "interegular", "partial_json_parser", "mistral_common", "openai", "openai_harmony", "tiktoken", "sentencepiece", "gguf", "PIL", "cv2", "av", "decord", "soundfile", "timm", "einops", "scipy", "numba", "ninja", "tvm_ffi", "apache_tvm_ffi", "modelscope", "datasets", "mooncake", "blobfile", "aiohttp", "fastapi", "starlette", "uvicorn", "uvloop", "watchfiles", "prometheus_client", "prometheus_fastapi_instrumentator", "zmq", "requests", "psutil", "orjson", "msgpack", "cbor2", "pybase64", "setproctitle", "IPython", "tqdm", "jinja2", "pydantic_settings", "grpc", "google", "smg_grpc_proto", "sglang_router", "xxhash", "blake3", "diskcache", "filelock", "ijson", "model_hosting_container_standards", "urllib3"]
)
# Attributes real torch lacks: `hasattr(torch, "npu")` must stay False or SGLang picks the NPU path.
ABSENT = frozenset({"npu", "musa", "mlu", "hpu", "sdaa", "gcu"})
# Attribute reads whose value code uses as a string (getattr(torch, triton...backend)).
STRINGS = {"name": "stub", "backend": "cpu", "device_name": "cpu", "version": "0.0.0"}
# Lookups that must fail as they do without a GPU (SGLang's fla utils catch it and fall back to CPU).
RAISE = frozenset({"triton.runtime.driver.active"})
# Dunder names Python, typing, dataclasses and pydantic probe: a stub must not pretend to have them.
_DENY = frozenset(
    ["__wrapped__", "__signature__", "__fspath__", "__origin__", "__args__", "__parameters__", "__supertype__", "__func__", "__self__", "__code__", "__dataclass_fields__", "__dataclass_params__", "__get__", "__set__", "__set_name__", "__instancecheck__", "__subclasscheck__", "__class_getitem__", "__path__", "__file__", "__spec__", "__loader__", "__all__", "__abstractmethods__", "__isabstractmethod__", "__slots__", "__annotations__", "__orig_bases__", "__reduce_ex__", "__reduce__", "__getstate__", "__copy__", "__deepcopy__", "__length_hint__", "__await__", "__aiter__", "__anext__", "__get_validators__", "__modify_schema__", "__attrs_attrs__", "__objclass__", "__text_signature__", "__doc__", "__name__", "__qualname__", "__module__", "__dict__", "__weakref__", "__init_subclass__", "__bool__", "__len__"]
)


def _denied(name: str) -> bool:
    return name in _DENY or name.startswith(("__array", "__pydantic", "__typing", "_pytest"))


def _infer_schema(fn: Callable[..., Any], *args: object, **kwargs: object) -> str:
    """torch.library.infer_schema, enough for vLLM's IR ops: one Tensor per parameter and output."""
    sig = inspect.signature(fn)
    text = sig.return_annotation if isinstance(sig.return_annotation, str) else repr(sig.return_annotation)
    outputs = max(1, text.count("Tensor")) if "tuple" in text.lower() else 1
    outs = ", ".join(["Tensor"] * outputs)
    params = ", ".join(f"Tensor {p}" for p in sig.parameters)
    return f"({params}) -> " + (f"({outs})" if outputs > 1 else outs)


VALUES: dict[str, Any] = {
    "torch.library.infer_schema": _infer_schema,
    "torch.iinfo": lambda *a, **k: types.SimpleNamespace(min=-(2**63), max=2**63 - 1, bits=64),
    "torch.finfo": lambda *a, **k: types.SimpleNamespace(min=-3.4e38, max=3.4e38, eps=1.2e-7, tiny=1.2e-38, bits=32),
}


class _StubMeta(abc.ABCMeta):
    """The type of every stub: attribute access, calls, indexing and arithmetic all succeed."""

    def __new__(mcls, name: str, bases: tuple[type, ...], ns: dict[str, Any], **kw: Any) -> _StubMeta:
        return super().__new__(mcls, name, bases, dict(ns))

    def __init__(cls, name: str, bases: tuple[type, ...], ns: dict[str, Any], **kw: Any) -> None:
        super().__init__(name, bases, ns)

    def __getattr__(cls, name: str) -> Any:
        if _denied(name):
            raise AttributeError(name)
        if name in STRINGS:
            return STRINGS[name]
        full = f"{cls.__qualname__}.{name}"
        if full in VALUES:
            return VALUES[full]
        if full in RAISE:
            raise RuntimeError(f"{full}: no accelerator behind this stub")
        return _make(full)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs and not isinstance(args[0], _StubMeta):
            return _decorated(args[0])  # used as a decorator
        return super().__call__()

    def __mro_entries__(cls, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (cls,)

    def register(cls, *args: Any, **kwargs: Any) -> Any:  # AutoConfig.register(name, cls)
        return args[-1] if args else None

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __setitem__(cls, key: Any, value: Any) -> None:
        pass

    def __delitem__(cls, key: Any) -> None:
        pass

    def __contains__(cls, item: Any) -> bool:
        return False

    def __iter__(cls) -> Iterator[Any]:
        return iter(())

    def __len__(cls) -> int:
        return 0

    def __bool__(cls) -> bool:
        return False

    def __int__(cls) -> int:
        return 0

    def __index__(cls) -> int:
        return 0

    def __float__(cls) -> float:
        return 0.0

    def __lt__(cls, other: Any) -> bool:
        return False

    __gt__ = __le__ = __ge__ = __lt__

    def __add__(cls, other: Any) -> Any:
        return cls

    __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = __add__
    __floordiv__ = __rfloordiv__ = __mod__ = __pow__ = __rpow__ = __or__ = __ror__ = __add__

    def __neg__(cls) -> Any:
        return cls

    def __enter__(cls) -> Any:
        return cls

    def __exit__(cls, *exc: Any) -> Literal[False]:
        return False


class _StubBase(metaclass=_StubMeta):
    """Instances of stubs: as permissive as their type; every stub equals every other."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __init_subclass__(cls, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        if name in STRINGS:
            return STRINGS[name]
        return _make(name)()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return _decorated(args[0])
        return type(self)()

    def __getitem__(self, item: Any) -> Any:
        return type(self)()

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def __delitem__(self, key: Any) -> None:
        pass

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __bool__(self) -> bool:
        return False

    def __int__(self) -> int:
        return 0

    def __index__(self) -> int:
        return 0

    def __float__(self) -> float:
        return 0.0

    def __str__(self) -> str:
        return "0"

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> Literal[False]:
        return False

    def __add__(self, other: Any) -> Any:
        return self

    __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = __add__
    __floordiv__ = __rfloordiv__ = __mod__ = __pow__ = __rpow__ = __or__ = __neg__ = __add__

    def __lt__(self, other: Any) -> bool:
        return False

    __gt__ = __le__ = __ge__ = __lt__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _StubBase)

    def __ne__(self, other: object) -> bool:
        return not isinstance(other, _StubBase)

    def __hash__(self) -> int:
        return 0

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema  # pydantic is real in the capture venv

        return core_schema.any_schema()


class _Wrapped:
    """A function decorated by a stub: still callable, and any attribute (``fn.register_fake``) is a stub."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self._fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _make(name)()

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)


def _decorated(obj: Any) -> Any:
    return obj if isinstance(obj, type) else _Wrapped(obj)


def _make(qualname: str) -> type:
    module = qualname.rsplit(".", 1)[0] if "." in qualname else qualname
    return _StubMeta(qualname.rsplit(".", 1)[-1], (_StubBase,), {"__qualname__": qualname, "__module__": module})


class _StubModule(types.ModuleType):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__path__: list[str] = []
        self.__version__ = "99.0.0"

    def __getattr__(self, name: str) -> Any:
        if (name.startswith("__") and name.endswith("__")) or name in ABSENT:
            raise AttributeError(name)
        full = f"{self.__name__}.{name}"
        return VALUES[full] if full in VALUES else _make(full)


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _StubModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        pass


class _FakeDistribution(metadata.Distribution):
    """``importlib.metadata.version("torch")`` for a stubbed package."""

    def __init__(self, name: str, version: str) -> None:
        self._text = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"

    def read_text(self, filename: str) -> str | None:
        return self._text if filename in ("METADATA", "PKG-INFO") else None

    def locate_file(self, path: Any) -> Any:
        return path


class StubFinder(importlib.abc.MetaPathFinder):
    """Stubs the heavy packages and the release's missing compiled modules (``vllm._C``)."""

    def __init__(self, own: str, heavy: frozenset[str], versions: dict[str, str]) -> None:
        self.own = own
        self.heavy = heavy
        self.versions = versions

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        root = name.split(".")[0]
        if root == self.own:
            if "." not in name or importlib.machinery.PathFinder.find_spec(name, path) is not None:
                return None  # the release's own Python code
        elif root not in self.heavy:
            return None
        return importlib.machinery.ModuleSpec(name, _StubLoader(), is_package=True)

    def find_distributions(self, context: Any = None) -> Iterator[metadata.Distribution]:
        name = (getattr(context, "name", None) or "").replace("-", "_").lower()
        if name in self.versions:
            return iter([_FakeDistribution(name, self.versions[name])])
        if name and name in {h.lower() for h in self.heavy}:
            return iter([_FakeDistribution(name, "99.0.0")])
        return iter(())


def _wheel_version(src: str, engine: str) -> str:
    infos = glob.glob(os.path.join(src, f"{engine}-*.dist-info"))
    if not infos:
        raise SystemExit(f"{src} holds no {engine}-*.dist-info: extract the whole wheel")
    return os.path.basename(infos[0])[len(engine) + 1 : -len(".dist-info")]


def _run_sglang(src: str, args: list[str]) -> None:
    # sglang/__init__.py imports the whole runtime: register a bare package instead.
    package = types.ModuleType("sglang")
    package.__path__ = [os.path.join(src, "sglang")]
    sys.modules["sglang"] = package
    sys.argv = ["launch_server.py", *args]  # `python -m sglang.launch_server`
    from sglang.srt.server_args import prepare_server_args

    prepare_server_args(args)


def _run_vllm(src: str, args: list[str]) -> None:
    points = configparser.ConfigParser()
    points.read(glob.glob(os.path.join(src, "vllm-*.dist-info", "entry_points.txt")))
    module, func = points["console_scripts"]["vllm"].split(":")
    sys.argv = ["vllm", *args]
    getattr(importlib.import_module(module), func)()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("sglang", "vllm"), required=True)
    parser.add_argument("--src", required=True, help="the extracted wheel")
    parser.add_argument("--stub", action="append", default=[], help="one more module to stub")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args()
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    version = _wheel_version(ns.src, ns.engine)
    # vLLM picks its platform from its own version string: "+cpu" selects the CPU platform.
    versions = {"vllm": f"{version}+cpu"} if ns.engine == "vllm" else {}
    sys.path.insert(0, ns.src)
    sys.meta_path.insert(0, StubFinder(ns.engine, HEAVY | set(ns.stub), versions))
    os.environ.setdefault("COLUMNS", "80")
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    (_run_sglang if ns.engine == "sglang" else _run_vllm)(ns.src, args)


if __name__ == "__main__":
    main()
