"""The README's Python snippet runs (the snippet after <!-- snippet:python -->)."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_snippet_runs(capsys):
    text = README.read_text()
    match = re.search(r"<!-- snippet:python -->\n```python\n(.*?)```", text, re.S)
    assert match, "README.md has no <!-- snippet:python --> block"
    exec(compile(match.group(1), "README.md:snippet:python", "exec"), {})
    printed = capsys.readouterr().out
    assert printed.startswith("1.13862943611") and "float64" in printed
