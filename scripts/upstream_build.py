"""Rebuild advice/data/upstream_names.json: the names NCCL, PyTorch, CUDA, DeepSpeed and vLLM define.

A developer script, run by hand when upstream moves; nothing imports it at run time or in tests. Standard
library only: it reads upstream snapshots and never imports or runs upstream code. Its hand-curated tables live
in data/upstream_tables.json beside it.

What it reads (one argument each; every part is optional, a part left out keeps its namespace from the
current JSON):

- ``--nccl``: a bare git dir of NVIDIA/nccl (the search tool's ``fetch github:NVIDIA/nccl`` gives
  ``/work/.mirror/NVIDIA+nccl/repo``). Every ``NCCL_PARAM``/``DEFINE_NCCL_PARAM``, every ``ncclGetEnv``/
  ``getenv``/``ncclGetLevel`` literal in src/, plugins/, contrib/ and bindings/ (tests left out), and the headings
  of docs/userguide/source/env.rst, which must all be known or deprecated.
- ``--torch``: a PyTorch wheel or an installed ``torch`` package dir. Use the CUDA wheel (``pip --isolated
  download --no-deps --only-binary :all: --python-version 3.11 --platform manylinux_2_28_x86_64 torch==X``):
  the CPU wheel lacks libtorch_cuda.so, where most ProcessGroupNCCL names live. Reads every env lookup in the
  Python sources (AST), every getCvar*/get_env/check_env literal and alias list in torch/include, the
  NUL-terminated TORCH_*/PYTORCH_* strings of torch/lib/*.so, and torchrun's options from
  torch/distributed/run.py and launch.py (AST of ``add_argument``).
- ``--deepspeed``: a bare git dir of deepspeedai/DeepSpeed (``fetch github:deepspeedai/DeepSpeed``). DS_*/
  DEEPSPEED_* env reads (AST), ``BUILD_VAR`` of every op builder, the launcher's ``parse_args``, and the config
  keys: constants modules, pydantic ``DeepSpeedConfigModel`` fields with their aliases and deprecations, the
  keys config.py reads, and the keyword arguments of DeepSpeed's and torch's optimizers (they sit in
  ``"optimizer": {"params": ...}``).
- ``--vllm``: a vLLM wheel (``pip download --no-deps --only-binary :all: vllm==X``; the git repo is too big for
  ``fetch``). Flags of ``vllm serve`` from ``add_argument`` calls and ``FrontendArgs`` fields, ``EngineArgs``
  fields and ``LLM.__init__`` parameters as keyword arguments.

CUDA's own variables cannot be extracted (the driver is closed source): they are curated (the tables' ``cuda_known``)
from the CUDA Programming Guide, the CUDA-GDB and MPS manuals, plus the CUDA_* names PyTorch's Python code reads.

Refresh::

    python scripts/upstream_build.py --nccl /work/.mirror/NVIDIA+nccl/repo \\
        --deepspeed /work/.mirror/deepspeedai+DeepSpeed/repo \\
        --torch /tmp/torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl \\
        --vllm /tmp/vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl --checked 2026-11-25

(run it with the project's venv python: without ``--torch`` the DeepSpeed part reads torch/optim from the installed
torch), then review the diff of the JSON: hand-curated parts (deprecations with their notes, ``not_read``, CUDA, sources)
live in scripts/data/upstream_tables.json and are merged over what is extracted. ``--check`` only validates the JSON.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import io
import json
import re
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "advice" / "data" / "upstream_names.json"
TABLES = Path(__file__).with_name("data") / "upstream_tables.json"
Entry = dict[str, Any]

# --- curated data (merged over what is extracted; @COMMIT becomes the snapshot's short commit) ----------------
# What each table holds: the JSON's "_comment".

_CURATED: dict[str, Any] = json.loads(TABLES.read_text(encoding="utf-8"))
CURATED_NAMESPACES: dict[str, Entry] = _CURATED["namespaces"]
CURATED_NCCL_DEPRECATED: dict[str, Entry] = _CURATED["nccl_deprecated"]
CURATED_NCCL_NOT_READ: dict[str, Entry] = _CURATED["nccl_not_read"]
CURATED_TORCH_DEPRECATED: dict[str, Entry] = _CURATED["torch_deprecated"]
CURATED_TORCH_NOT_READ: dict[str, Entry] = _CURATED["torch_not_read"]
NOT_ENV_IN_SO: set[str] = set(_CURATED["torch_so_not_env"])
CURATED_TORCHRUN_DEPRECATED: dict[str, Entry] = _CURATED["torchrun_deprecated"]
CURATED_DS_DEPRECATED: dict[str, Entry] = _CURATED["deepspeed_deprecated"]
CURATED_VLLM_DEPRECATED: dict[str, Entry] = _CURATED["vllm_deprecated"]
CURATED_CUDA_KNOWN: list[str] = [name for names in _CURATED["cuda_known"].values() for name in names]
CURATED_CUDA_DEPRECATED: dict[str, Entry] = _CURATED["cuda_deprecated"]
EXPECT_KNOWN: dict[str, list[str]] = _CURATED["expect_known"]
EXPECT_NOT_KNOWN: dict[str, list[str]] = _CURATED["expect_not_known"]
EXPECT_DEPRECATED: dict[tuple[str, str], str] = {(ns_id, name): new for ns_id, name, new in _CURATED["expect_deprecated"]}

# --- reading upstream snapshots -----------------------------------------------------------------------------


@dataclass
class Tree:
    """The text files of one upstream snapshot (bare git dir, wheel, or directory), loaded by suffix."""

    path: Path
    suffixes: tuple[str, ...]
    files: dict[str, str] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)  # shared libraries, kept as bytes

    def __post_init__(self) -> None:
        if (self.path / "HEAD").is_file() and (self.path / "objects").is_dir():
            self._load_git()
        elif zipfile.is_zipfile(self.path):
            with zipfile.ZipFile(self.path) as wheel:
                for name in wheel.namelist():
                    self._keep(name, lambda n=name: wheel.read(n))
        else:
            root = self.path.parent
            for file in self.path.rglob("*"):
                if file.is_file():
                    self._keep(str(file.relative_to(root)), file.read_bytes)

    def _load_git(self) -> None:
        specs = [f"*{suffix}" for suffix in self.suffixes]
        tar = subprocess.run(
            ["git", f"--git-dir={self.path}", "archive", "--format=tar", "HEAD", "--", *specs], check=True, capture_output=True
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
            for member in archive.getmembers():
                if member.isfile():
                    handle = archive.extractfile(member)
                    if handle is not None:
                        data = handle.read()
                        self._keep(member.name, lambda d=data: d)

    def _keep(self, name: str, read: Any) -> None:
        if name.endswith(".so") or ".so." in name:
            if ".so" in self.suffixes:
                self.blobs[name] = read()
        elif name.endswith(self.suffixes):
            self.files[name] = read().decode("utf-8", "replace")

    def commit(self) -> str:
        return git(self.path, "rev-parse", "--short=7", "HEAD")

    def under(self, *prefixes: str, skip: Iterable[str] = ()) -> dict[str, str]:
        skip = tuple(skip)
        return {n: t for n, t in self.files.items() if n.startswith(prefixes) and not any(s in n for s in skip)}


def git(gitdir: Path, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={gitdir}", *args], check=True, capture_output=True, text=True).stdout.strip()


TEST_PARTS = ("/test/", "/tests/", "/testing/", "/test_", "_test.", "/benchmarks/", "/ci/", "/examples/", "/docs/")

# --- Python: which names are read as environment variables (AST) --------------------------------------------


def _strings(node: ast.AST | None, consts: dict[str, str]) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name) and node.id in consts:
        return [consts[node.id]]
    if isinstance(node, ast.Attribute) and node.attr in consts:  # self.BUILD_VAR, module.CONSTANT
        return [consts[node.attr]]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [s for e in node.elts for s in _strings(e, consts)]
    return []


def _is_environ(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "keys":
        node = node.func.value
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (isinstance(node, ast.Name) and node.id == "environ")


def _callee(node: ast.Call) -> str:
    return node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id if isinstance(node.func, ast.Name) else ""


ENV_HELPER = re.compile(r"env|_load_boolean_flag$", re.I)  # get_env_if_set, is_env_set, check_bool_env, parse_env ...
NOT_A_READER = re.compile(r"^_?(?:set|put|unset|update)")


def parse_all(files: dict[str, str]) -> dict[str, ast.Module]:
    trees = {}
    for name, text in files.items():
        if name.endswith(".py"):
            try:
                trees[name] = ast.parse(text)
            except SyntaxError:
                continue
    return trees


def module_constants(trees: dict[str, ast.Module]) -> dict[str, str]:
    """NAME = "string" anywhere (module or class level), so ``os.environ.get(SOME_CONST)`` resolves."""
    consts: dict[str, str] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        consts.setdefault(target.id, node.value.value)
    return consts


def python_env_reads(trees: dict[str, ast.Module], pattern: re.Pattern[str]) -> dict[str, set[str]]:
    """name -> files reading it: os.environ.get/[]/in/pop/setdefault, os.getenv, *env*(NAME) helpers,
    torch's Config(env_name_default=/env_name_force=), and NAME/BUILD_VAR/*ENV* constants holding the name."""
    consts = module_constants(trees)
    found: dict[str, set[str]] = {}
    for path, tree in trees.items():
        local = dict(consts)
        local.update(
            {
                n.targets[0].id: n.value.value
                for n in tree.body
                if isinstance(n, ast.Assign)
                and len(n.targets) == 1
                and isinstance(n.targets[0], ast.Name)
                and isinstance(n.value, ast.Constant)
                and isinstance(n.value.value, str)
            }
        )
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Call):
                callee = _callee(node)
                if isinstance(node.func, ast.Attribute) and _is_environ(node.func.value) and callee in ("get", "pop", "setdefault"):
                    names = _strings(node.args[0], local) if node.args else []
                elif ENV_HELPER.search(callee) and not NOT_A_READER.match(callee) and node.args:
                    names = _strings(node.args[0], local)
                names += [s for kw in node.keywords if kw.arg in ("env_name_default", "env_name_force") for s in _strings(kw.value, local)]
            elif isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
                names = _strings(node.slice, local)
            elif (
                isinstance(node, ast.Compare)
                and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
                and any(_is_environ(c) for c in node.comparators)
            ):
                names = _strings(node.left, local)
            elif (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and (node.targets[0].id == "BUILD_VAR" or "ENV" in node.targets[0].id.upper())
            ):
                names = _strings(node.value, local)
            for name in names:
                if pattern.match(name):
                    found.setdefault(name, set()).add(path)
    return found


def add_argument_flags(tree: ast.AST) -> list[str]:
    """Option strings of every ``*.add_argument(...)`` call under a node."""
    flags = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _callee(node) == "add_argument":
            flags += [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")]
    return flags


def function(tree: ast.Module, name: str) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise LookupError(name)


def class_def(tree: ast.Module, name: str) -> ast.ClassDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise LookupError(name)


def fields(cls: ast.ClassDef) -> list[str]:
    return [
        n.target.id
        for n in cls.body
        if isinstance(n, ast.AnnAssign)
        and isinstance(n.target, ast.Name)
        and not n.target.id.startswith("_")
        and "ClassVar" not in ast.unparse(n.annotation)
    ]


def init_params(cls: ast.ClassDef) -> list[str]:
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            args = node.args
            return [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs if a.arg not in ("self", "params")]
    return []


def with_both_spellings(flags: Iterable[str]) -> list[str]:
    """argparse in torchrun/vLLM takes --a-b and --a_b (vLLM converts, torchrun lists both)."""
    out = set(flags)
    out |= {f.replace("-", "_").replace("__", "--", 1) for f in flags if f.startswith("--")}
    out |= {f.replace("_", "-") for f in flags if f.startswith("--")}
    return sorted(out)


# --- NCCL ---------------------------------------------------------------------------------------------------

NCCL_PARAM = re.compile(r"\bNCCL_PARAM\(\s*\w+\s*,\s*\"([A-Z0-9_]+)\"")
NCCL_DEFINE = re.compile(r"\bDEFINE_NCCL_PARAM\(\s*\w+\s*,[^,]+,\s*(NCCL_[A-Z0-9_]+)\s*,")
NCCL_GETENV = re.compile(
    r"\b(?:ncclGetEnv|getenv|ncclLoadParam|ncclGetLevel\(\s*&?\w+\s*,\s*(?:NULL|\"NCCL_[A-Z0-9_]+\")\s*,)\s*\(?\s*\"(NCCL_[A-Z0-9_]+)\""
)
NCCL_LEVEL = re.compile(r"\bncclGetLevel\(\s*&?\w+\s*,\s*(?:\"(NCCL_[A-Z0-9_]+)\"|NULL)\s*,\s*\"(NCCL_[A-Z0-9_]+)\"")
PLUGIN_GETENV = re.compile(r"\b(?:getenv|\w+FromEnv|os\.environ\.get)\(\s*\"(NCCL_[A-Z0-9_]+)\"")
RST_HEADING = re.compile(r"^(NCCL_[A-Z0-9_]+)[^\n]*\n-{4,}\s*$", re.M)


def nccl(tree: Tree) -> Entry:
    src = tree.under("src/", skip=TEST_PARTS)
    known: set[str] = set()
    for text in src.values():
        known |= {"NCCL_" + s for s in NCCL_PARAM.findall(text)}
        known |= set(NCCL_DEFINE.findall(text)) | set(NCCL_GETENV.findall(text))
        known |= {n for pair in NCCL_LEVEL.findall(text) for n in pair if n}
    for text in tree.under("plugins/", "contrib/", "bindings/", skip=TEST_PARTS).values():
        known |= set(PLUGIN_GETENV.findall(text))
    documented = set(RST_HEADING.findall(tree.files["docs/userguide/source/env.rst"]))
    version = dict(re.findall(r"NCCL_(MAJOR|MINOR|PATCH)\s*:=\s*(\d+)", tree.files["makefiles/version.mk"]))
    commit = tree.commit()
    entry = CURATED_NAMESPACES["nccl_env"] | {
        "version": f"NCCL {version['MAJOR']}.{version['MINOR']}.{version['PATCH']} (NVIDIA/nccl@{commit})",
        "known": sorted(known),
    }
    entry["sources"] = [s.replace("@COMMIT", f"@{commit}") for s in entry["sources"]]
    entry["deprecated"] = _sourced(CURATED_NCCL_DEPRECATED, commit)
    entry["not_read"] = _sourced(CURATED_NCCL_NOT_READ, commit)
    stray = documented - known - set(entry["deprecated"])
    if stray:
        raise SystemExit(f"env.rst documents names neither read nor curated as deprecated: {sorted(stray)}")
    return entry


def _sourced(table: dict[str, Entry], commit: str) -> dict[str, Entry]:
    return {
        k: {f: (v.replace("@COMMIT", f"@{commit}") if isinstance(v, str) else v) for f, v in e.items()} for k, e in sorted(table.items())
    }


# --- PyTorch ------------------------------------------------------------------------------------------------

TORCH_PATTERN = re.compile(r"^(?:TORCH|PYTORCH)_[A-Z0-9_]+$")
CPP_READ = re.compile(r"\b(?:getCvar(?:String|Int|Bool)|get_env|check_env|getenv)\(\s*\{?\s*\"((?:TORCH|PYTORCH)_[A-Z0-9_]+)\"")
CPP_ALIASES = re.compile(r"(?:std::vector<std::string>\s+\w+\s*=\s*|getCvar(?:String|Int|Bool)\(\s*)\{([^{}]*)\}")
ENV_LIKE = re.compile(r"^[A-Z][A-Z0-9]*_[A-Z0-9_]+$")
SO_STRING = re.compile(rb"(?<=\x00)((?:TORCH|PYTORCH)_[A-Z0-9_]{2,})(?=\x00)")


def torch_(tree: Tree) -> tuple[Entry, Entry, set[str]]:
    version_py = tree.files["torch/version.py"]
    version = re.search(r"__version__ = '([^']+)'", version_py)
    git_version = re.search(r"git_version = '([0-9a-f]{7})", version_py)
    assert version and git_version
    label = f"PyTorch {version.group(1)} (pytorch/pytorch@{git_version.group(1)})"
    python = {n: t for n, t in tree.under("torch/").items() if n.endswith(".py") and not any(p in n for p in TEST_PARTS)}
    trees = parse_all(python)
    known = set(python_env_reads(trees, TORCH_PATTERN))
    cuda_reads = python_env_reads(trees, re.compile(r"^CUDA_[A-Z0-9_]+$"))
    aliases: dict[str, str] = {}
    for text in tree.under("torch/include/").values():
        known |= set(CPP_READ.findall(text))
        for body in CPP_ALIASES.findall(text):
            names = re.findall(r"\"([A-Z][A-Z0-9_]+)\"", body)
            if not names or not TORCH_PATTERN.match(names[0]) or not all(ENV_LIKE.match(n) for n in names):
                continue  # a list of layout names or the like, not an env alias list
            known.update(n for n in names if TORCH_PATTERN.match(n))
            aliases.update({old: names[0] for old in names[1:]})  # getCvar* warns: "old is deprecated; use first"
    for blob in tree.blobs.values():
        known |= {m.decode() for m in SO_STRING.findall(blob)} - NOT_ENV_IN_SO
    deprecated = {
        old: {
            "replacement": new,
            "since": "",
            "note": f"Legacy alias: PyTorch still reads it but warns that it is deprecated; set {new}.",
            "note_zh": f"旧名：PyTorch 仍会读取，但会提示已弃用，请改用 {new}。",
            "source": f"pytorch/pytorch@{git_version.group(1)}:torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp",
        }
        for old, new in aliases.items()
    }
    for name, curated in CURATED_TORCH_DEPRECATED.items():
        deprecated[name] = deprecated.get(name, {}) | curated
    entry = CURATED_NAMESPACES["torch_env"] | {
        "version": label,
        "known": sorted(known - set(CURATED_TORCH_NOT_READ)),
        "deprecated": dict(sorted(deprecated.items())),
        "not_read": dict(sorted(CURATED_TORCH_NOT_READ.items())),
    }
    entry["sources"] = [s.replace("@COMMIT", f"@{git_version.group(1)}") for s in entry["sources"]]
    entry["deprecated"] = _sourced(entry["deprecated"], git_version.group(1))
    run = ast.parse(python["torch/distributed/run.py"])
    launch = ast.parse(python["torch/distributed/launch.py"])
    flags = add_argument_flags(function(run, "get_args_parser")) + add_argument_flags(function(launch, "parse_args")) + ["-h", "--help"]
    flags_entry = CURATED_NAMESPACES["torchrun_flags"] | {
        "version": label,
        "known": sorted(set(flags)),
        "deprecated": _sourced(CURATED_TORCHRUN_DEPRECATED, git_version.group(1)),
    }
    flags_entry["sources"] = [s.replace("@COMMIT", f"@{git_version.group(1)}") for s in flags_entry["sources"]]
    return entry, flags_entry, set(cuda_reads)


# --- DeepSpeed ----------------------------------------------------------------------------------------------

DS_ENV = re.compile(r"^(?:DS|DEEPSPEED)_[A-Z0-9_]+$")
CONFIG_KEY = re.compile(r"^[a-z][a-z0-9_]*$")
KEY_READERS = {"get_scalar_param", "get_list_param", "get_dict_param", "get"}
# constants of checkpoint files, I/O benchmarks and launcher backends are not config keys
NOT_CONFIG_DIRS = ("deepspeed/checkpoint/", "deepspeed/io/", "deepspeed/nvme/", "deepspeed/launcher/")
OPTIMIZER_DIRS = (
    "deepspeed/ops/adam/",
    "deepspeed/ops/adagrad/",
    "deepspeed/ops/lamb/",
    "deepspeed/ops/lion/",
    "deepspeed/runtime/fp16/onebit/",
    "deepspeed/runtime/zenflow/",
)


def deepspeed(tree: Tree) -> tuple[Entry, Entry, Entry]:
    commit = tree.commit()
    version = tree.files["version.txt"].strip() if "version.txt" in tree.files else ""
    label = f"DeepSpeed {version} (deepspeedai/DeepSpeed@{commit})"
    code = tree.under("deepspeed/", "op_builder/", "accelerator/", "setup.py", skip=TEST_PARTS)
    trees = parse_all(code)
    env = CURATED_NAMESPACES["deepspeed_env"] | {"version": label, "known": sorted(python_env_reads(trees, DS_ENV))}
    runner = trees["deepspeed/launcher/runner.py"]
    flags = add_argument_flags(function(runner, "parse_args")) + ["-h", "--help"]
    launcher = CURATED_NAMESPACES["deepspeed_launcher_flags"] | {"version": label, "known": sorted(set(flags))}
    keys, deprecated = deepspeed_keys(trees, commit)
    keys |= torch_optimizer_params()
    config = CURATED_NAMESPACES["deepspeed_config_keys"] | {
        "version": label,
        "known": sorted(keys - set(deprecated)),
        "deprecated": deprecated,
    }
    for entry in (env, launcher, config):
        entry["sources"] = [s.replace("@COMMIT", f"@{commit}") for s in entry["sources"]]
    return env, launcher, config


TORCH_OPTIMIZER_PARAMS: set[str] = set()  # filled by main() from the torch tree, when given


def torch_optimizer_params() -> set[str]:
    return TORCH_OPTIMIZER_PARAMS


def deepspeed_keys(trees: dict[str, ast.Module], commit: str) -> tuple[set[str], dict[str, Entry]]:
    keys: set[str] = set()
    consts = module_constants(trees)
    for path, tree in trees.items():
        if re.search(r"(?:constants|config|lr_schedules)\.py$", path) and not path.startswith(NOT_CONFIG_DIRS):
            for node in tree.body:  # KEY = "key" at module level, defaults left out
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                    target = node.targets[0]
                    if isinstance(target, ast.Name) and not target.id.endswith("_DEFAULT") and CONFIG_KEY.match(node.value.value):
                        keys.add(node.value.value)
        if path.startswith("deepspeed/runtime/") and path.endswith("config.py") or path == "deepspeed/runtime/engine.py":
            for call in ast.walk(tree):  # keys the config readers look up by literal
                if isinstance(call, ast.Call) and _callee(call) in KEY_READERS and call.args:
                    arg = call.args[1] if _callee(call) != "get" and len(call.args) > 1 else call.args[0]
                    keys.update(s for s in _strings(arg, consts) if CONFIG_KEY.match(s))
        if path.startswith(OPTIMIZER_DIRS):
            for cls_node in ast.walk(tree):  # "optimizer": {"params": {...}} goes to these constructors
                if isinstance(cls_node, ast.ClassDef):
                    keys.update(p for p in init_params(cls_node) if CONFIG_KEY.match(p))
    models = pydantic_models(trees)
    aliases: dict[str, str] = {}
    deprecated: dict[str, Entry] = {}
    for path, cls in models:
        for node in cls.body:
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)) or node.target.id.startswith("_"):
                continue
            name = node.target.id
            if name == "model_config":
                continue
            keys.add(name)
            field_call = node.value if isinstance(node.value, ast.Call) and _callee(node.value) == "Field" else None
            if field_call is None:
                continue
            for kw in field_call.keywords:
                if kw.arg == "alias" and isinstance(kw.value, ast.Constant):
                    keys.add(str(kw.value.value))
                    aliases[name] = str(kw.value.value)
                if kw.arg == "json_schema_extra" and isinstance(kw.value, ast.Dict):
                    extra = {k.value: v for k, v in zip(kw.value.keys, kw.value.values, strict=True) if isinstance(k, ast.Constant)}
                    flag = extra.get("deprecated")
                    if isinstance(flag, ast.Constant) and flag.value is True:
                        new = extra.get("new_param")
                        deprecated[name] = {
                            "replacement": new.value if isinstance(new, ast.Constant) else None,
                            "source": f"deepspeedai/DeepSpeed@{commit}:{path}",
                        }
    for name, entry in deprecated.items():
        new = entry["replacement"]
        if new in aliases:  # the JSON spelling users write is the alias (stage3_...)
            entry["replacement"] = aliases[new]
        curated = CURATED_DS_DEPRECATED.get(name, {})
        entry.update(
            {
                "since": curated.get("since", ""),
                "note": curated.get("note", _ds_note(entry["replacement"])),
                "note_zh": curated.get("note_zh", _ds_note_zh(entry["replacement"])),
            }
        )
    return keys, dict(sorted(deprecated.items()))


def _ds_note(new: str | None) -> str:
    return (
        f"Old key: DeepSpeed still accepts it, warns, and maps it to {new}."
        if new
        else "Old key: DeepSpeed still accepts it but warns; remove it."
    )


def _ds_note_zh(new: str | None) -> str:
    if new:
        return f"旧键名：DeepSpeed 仍接受，但会警告并映射到 {new}。"
    return "旧键名：DeepSpeed 仍接受但会警告，建议删掉。"


def pydantic_models(trees: dict[str, ast.Module]) -> list[tuple[str, ast.ClassDef]]:
    """Classes that derive (by name, across files) from DeepSpeedConfigModel."""
    classes = [(p, n) for p, t in trees.items() for n in ast.walk(t) if isinstance(n, ast.ClassDef)]
    bases = {id(n): [ast.unparse(b).split(".")[-1] for b in n.bases] for _, n in classes}
    names, models = {"DeepSpeedConfigModel"}, set()
    changed = True
    while changed:  # two classes may share a name (DeepSpeedInferenceConfig): judge each by its own bases
        changed = False
        for _, node in classes:
            if id(node) not in models and any(b in names for b in bases[id(node)]):
                models.add(id(node))
                names.add(node.name)
                changed = True
    return [(p, n) for p, n in classes if id(n) in models]


# --- vLLM ---------------------------------------------------------------------------------------------------


def negated_flags(module: ast.Module, cls_name: str) -> list[str]:
    """--no-X that argparse.BooleanOptionalAction adds: vLLM gives it to every bool field (get_kwargs: not to
    bool|str fields, which take an optional value) and to add_argument(..., action=BooleanOptionalAction)."""
    flags = []
    for node in class_def(module, cls_name).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and not node.target.id.startswith("_"):
            hint = ast.unparse(node.annotation)
            if re.search(r"\bbool\b", hint) and not re.search(r"\bstr\b", hint):
                flags.append("--no-" + node.target.id.replace("_", "-"))
    for call in ast.walk(module):
        if (
            isinstance(call, ast.Call)
            and _callee(call) == "add_argument"
            and any(kw.arg == "action" and ast.unparse(kw.value).endswith("BooleanOptionalAction") for kw in call.keywords)
        ):
            flags += ["--no-" + str(a.value)[2:] for a in call.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")]
    return flags


def vllm(tree: Tree) -> tuple[Entry, Entry]:
    version_py = tree.files["vllm/_version.py"]
    version = re.search(r"__version__ = version = '([^']+)'", version_py)
    commit = re.search(r"commit_id = 'g([0-9a-f]+)'", version_py)
    assert version and commit
    label = f"vLLM {version.group(1)} (vllm-project/vllm@{commit.group(1)})"
    args = ast.parse(tree.files["vllm/engine/arg_utils.py"])
    frontend = ast.parse(tree.files["vllm/entrypoints/common/cli_args.py"])
    llm = ast.parse(tree.files["vllm/entrypoints/llm.py"])
    flags = add_argument_flags(args) + add_argument_flags(frontend) + ["-h", "--help", "--version"]
    flags += [f"--{f.replace('_', '-')}" for cls in ("BaseFrontendArgs", "FrontendArgs") for f in fields(class_def(frontend, cls))]
    flags += ["-O"] + [f"-O{level}" for level in range(4)]  # FlexibleArgumentParser turns -O3 / -O 3 into --optimization-level
    flags += negated_flags(args, "EngineArgs") + negated_flags(frontend, "BaseFrontendArgs") + negated_flags(frontend, "FrontendArgs")
    kwargs = (
        set(fields(class_def(args, "EngineArgs")))
        | set(fields(class_def(args, "AsyncEngineArgs")))
        | set(init_params(class_def(llm, "LLM")))
    )
    messages = {
        n.targets[0].id: n.value
        for n in args.body
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and n.targets[0].id.endswith("_DEPRECATION_MESSAGE")
    }
    deprecated = {}
    for constant, node in messages.items():
        text = "".join(s.value for s in ast.walk(node) if isinstance(s, ast.Constant) and isinstance(s.value, str))
        flag = re.search(r"--[a-z0-9-]+", text)
        if flag is None or flag.group(0) not in CURATED_VLLM_DEPRECATED:
            raise SystemExit(f"vLLM deprecates something not curated yet: {constant}: {text}")
        row = CURATED_VLLM_DEPRECATED[flag.group(0)] | {
            "source": f"vllm-project/vllm@{commit.group(1)}:vllm/engine/arg_utils.py ({constant})"
        }
        for spelling in with_both_spellings([flag.group(0)]):
            deprecated[spelling] = row
    entry = CURATED_NAMESPACES["vllm_engine_args"] | {
        "version": label,
        "known": [f for f in with_both_spellings(flags) if f not in deprecated],
        "deprecated": dict(sorted(deprecated.items())),
    }
    kw_entry = CURATED_NAMESPACES["vllm_engine_kwargs"] | {
        "version": label,
        "known": sorted(kwargs - {"ir_op_priority"}),
        "deprecated": {"ir_op_priority": deprecated["--ir-op-priority"]},
    }
    for e in (entry, kw_entry):
        e["sources"] = [s.replace("@COMMIT", f"@{commit.group(1)}") for s in e["sources"]]
    return entry, kw_entry


# --- CUDA (curated: the driver and runtime are closed source) ------------------------------------------------


def cuda(torch_cuda_reads: set[str]) -> Entry:
    known = set(CURATED_CUDA_KNOWN) | torch_cuda_reads
    return CURATED_NAMESPACES["cuda_env"] | {"known": sorted(known), "deprecated": dict(sorted(CURATED_CUDA_DEPRECATED.items()))}


# --- validation ---------------------------------------------------------------------------------------------

NESTED_QUANTIFIER = re.compile(r"\([^()]*[+*][^()]*\)[+*{]")


def validate(data: dict[str, Any]) -> list[str]:
    """Problems with the registry (empty when it is sound)."""
    problems = []
    by_id = {ns["id"]: ns for ns in data["namespaces"]}
    for ns in data["namespaces"]:
        for key in ("pattern", "command"):
            if ns.get(key):
                re.compile(ns[key])
                if NESTED_QUANTIFIER.search(ns[key]):
                    problems.append(f"{ns['id']}: nested quantifier in {key}")
        if ns["known"] != sorted(set(ns["known"])):
            problems.append(f"{ns['id']}: known is not sorted and unique")
        pattern = re.compile(ns["pattern"]) if ns.get("pattern") else None
        for name in ns["known"]:
            if pattern and not pattern.match(name):
                problems.append(f"{ns['id']}: {name} does not match the namespace pattern")
        for table in ("deprecated", "not_read"):
            for name, row in ns.get(table, {}).items():
                missing = [f for f in ("note", "note_zh", "source") if not row.get(f)]
                missing += [f for f in ("replacement", "since") if table == "deprecated" and f not in row]
                if missing:
                    problems.append(f"{ns['id']}.{table}.{name}: missing {missing}")
                if table == "not_read" and name in ns["known"]:
                    problems.append(f"{ns['id']}: {name} is both known and not_read")
        if not ns.get("sources") or not ns.get("version"):
            problems.append(f"{ns['id']}: no sources or version")
    for ns_id, names in EXPECT_KNOWN.items():
        problems += [f"{ns_id}: {n} should be known" for n in names if ns_id in by_id and n not in by_id[ns_id]["known"]]
    for ns_id, names in EXPECT_NOT_KNOWN.items():
        problems += [f"{ns_id}: {n} should not be known" for n in names if ns_id in by_id and n in by_id[ns_id]["known"]]
    for (ns_id, name), new in EXPECT_DEPRECATED.items():
        row = by_id.get(ns_id, {}).get("deprecated", {}).get(name)
        if not row or row.get("replacement") != new:
            problems.append(f"{ns_id}: {name} should be deprecated in favour of {new}")
    return problems


# --- main ---------------------------------------------------------------------------------------------------

ORDER = [
    "nccl_env",
    "torch_env",
    "cuda_env",
    "torchrun_flags",
    "deepspeed_env",
    "deepspeed_launcher_flags",
    "deepspeed_config_keys",
    "vllm_engine_args",
    "vllm_engine_kwargs",
]


def build(args: argparse.Namespace, current: dict[str, Entry]) -> dict[str, Entry]:
    built: dict[str, Entry] = {}
    if args.nccl:
        built["nccl_env"] = nccl(Tree(args.nccl, (".cc", ".c", ".cu", ".h", ".cpp", ".py", ".rst", ".mk")))
    if args.torch:
        torch_tree = Tree(args.torch, (".py", ".h", ".hpp", ".cuh", ".so"))
        built["torch_env"], built["torchrun_flags"], cuda_reads = torch_(torch_tree)
        built["cuda_env"] = cuda(cuda_reads)
        optim = parse_all(torch_tree.under("torch/optim/"))
        TORCH_OPTIMIZER_PARAMS.update(
            p for t in optim.values() for n in ast.walk(t) if isinstance(n, ast.ClassDef) for p in init_params(n) if CONFIG_KEY.match(p)
        )
    elif "cuda_env" in current:
        built["cuda_env"] = current["cuda_env"]
    if args.deepspeed:
        if not TORCH_OPTIMIZER_PARAMS:  # no --torch: take torch/optim from the installed torch, if any (read, not imported)
            spec = importlib.util.find_spec("torch")
            if spec and spec.submodule_search_locations:
                optim = parse_all(Tree(Path(next(iter(spec.submodule_search_locations))) / "optim", (".py",)).files)
                TORCH_OPTIMIZER_PARAMS.update(
                    p
                    for t in optim.values()
                    for n in ast.walk(t)
                    if isinstance(n, ast.ClassDef)
                    for p in init_params(n)
                    if CONFIG_KEY.match(p)
                )
        built["deepspeed_env"], built["deepspeed_launcher_flags"], built["deepspeed_config_keys"] = deepspeed(
            Tree(args.deepspeed, (".py", ".txt"))
        )
    if args.vllm:
        built["vllm_engine_args"], built["vllm_engine_kwargs"] = vllm(Tree(args.vllm, (".py",)))
    for ns_id in ORDER:
        if ns_id in built:
            built[ns_id]["checked"] = args.checked
        elif ns_id in current:
            built[ns_id] = current[ns_id]
    return {ns_id: built[ns_id] for ns_id in ORDER if ns_id in built}


def write(namespaces: dict[str, Entry], out: Path) -> dict[str, Any]:
    versions = "; ".join(dict.fromkeys(ns["version"] for ns in namespaces.values() if "(" in ns["version"]))
    checked = max(ns.get("checked", "") for ns in namespaces.values())
    data = {
        "_comment": (
            "Names that upstream projects define, so traindoc can check every environment variable, launcher flag and config "
            "key an answer shows. Built by `python scripts/upstream_build.py` (see its docstring) from upstream snapshots: "
            f"{versions}; CUDA's list is curated from NVIDIA's manuals. Checked {checked}. "
            "known: every name upstream reads or accepts at that "
            "version; complete: whether known lists every accepted name (a name outside it is unknown, not unchecked). "
            "deprecated: names upstream still maps or once had, with the replacement (a deprecated name may also be "
            "read). not_read: names people use that nothing reads. An env name matching one namespace's pattern may belong "
            "to another (NCCL_BLOCKING_WAIT is PyTorch's legacy alias): look it up in every env namespace. Flags are checked "
            "before the script only; argparse also accepts unique prefixes of long options (torchrun, deepspeed)."
        ),
        "namespaces": [
            {
                k: ns[k]
                for k in (
                    "id",
                    "kind",
                    "project",
                    "pattern",
                    "command",
                    "complete",
                    "version",
                    "checked",
                    "sources",
                    "known",
                    "deprecated",
                    "not_read",
                )
                if k in ns
            }
            for ns in namespaces.values()
        ],
    }
    out.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python scripts/upstream_build.py",
        description=__doc__.split("\n\n")[0],
        epilog="Parts left out keep their namespaces from the current JSON. See the module docstring for how to refresh.",
    )
    parser.add_argument("--nccl", type=Path, help="bare git dir of NVIDIA/nccl")
    parser.add_argument("--torch", type=Path, help="PyTorch CUDA wheel, or an installed torch package dir")
    parser.add_argument("--deepspeed", type=Path, help="bare git dir of deepspeedai/DeepSpeed")
    parser.add_argument("--vllm", type=Path, help="vLLM wheel, or an installed vllm package dir")
    parser.add_argument("--checked", default="2026-11-25", help="date written as 'checked' on rebuilt namespaces")
    parser.add_argument("--out", type=Path, default=OUT, help=f"JSON to write (default {OUT})")
    parser.add_argument("--check", action="store_true", help="only validate the JSON at --out")
    args = parser.parse_args(argv)
    current = {}
    if args.out.exists():
        current = {ns["id"]: ns for ns in json.loads(args.out.read_text(encoding="utf-8"))["namespaces"]}
    if not args.check:
        write(build(args, current), args.out)
    data = json.loads(args.out.read_text(encoding="utf-8"))
    problems = validate(data)
    for ns in data["namespaces"]:
        print(
            f"{ns['id']:26} known {len(ns['known']):4}  deprecated {len(ns.get('deprecated', {})):3}  "
            f"not_read {len(ns.get('not_read', {})):2}  {ns['version']}"
        )
    print("\n".join(problems) or "valid", file=sys.stderr if problems else sys.stdout)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
