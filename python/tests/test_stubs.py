"""The type stubs (ropex/__init__.pyi) describe what the module has: same public names, same
methods and properties, same parameter names. So the stubs cannot rot."""

import ast
import inspect
import pathlib
import re

import pytest

import ropex

STUB = pathlib.Path(ropex.__file__).with_name("__init__.pyi")


def stub_tree():
    return ast.parse(STUB.read_text())


def public(names):
    return {n for n in names if not n.startswith("_") or n == "__init__"}


def test_stub_is_installed_with_py_typed():
    assert STUB.is_file() and STUB.with_name("py.typed").is_file()


def test_top_level_names_match():
    tree = stub_tree()
    defined = {node.name for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    defined |= {node.target.id for node in tree.body if isinstance(node, ast.AnnAssign)}
    assert public(defined) | {"__version__"} == set(ropex.__all__)


@pytest.mark.parametrize("node", [n for n in stub_tree().body if isinstance(n, ast.ClassDef)], ids=lambda n: n.name)
def test_class_members_match(node):
    runtime = getattr(ropex, node.name)
    stubbed = {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
    members = {name for name in dir(runtime) if not name.startswith("_")}
    assert public(stubbed) - {"__init__"} == members
    if "__init__" in stubbed:
        # pybind11 states the signature in the docstring: "__init__(self: ..., factor: float = 1.0, ...)".
        init = next(item for item in node.body if isinstance(item, ast.FunctionDef) and item.name == "__init__")
        signature = runtime.__init__.__doc__.splitlines()[0]
        names = re.findall(r"(?:\(|, )(\w+): ", signature)[1:]  # [0] is self
        assert [a.arg for a in init.args.args][1:] == names, signature


@pytest.mark.parametrize("name", ["apply_rope", "load_hf_config", "softmax", "entropy", "kl_divergence",
                                  "js_divergence"])
def test_python_function_parameters_match(name):
    node = next(n for n in stub_tree().body if isinstance(n, ast.FunctionDef) and n.name == name)
    stubbed = [a.arg for a in node.args.args]
    assert stubbed == list(inspect.signature(getattr(ropex, name)).parameters)
