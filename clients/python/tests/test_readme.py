"""Every Python example in clients/python/README.md runs against a real server
(each against its own, started with --admin; `port=7878` is replaced by its port)."""
from __future__ import annotations

import contextlib
import io
import pathlib
import re

import pytest

from conftest import Server

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_the_readme_has_examples():
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("source", EXAMPLES, ids=[f"example {n + 1}" for n in range(len(EXAMPLES))])
def test_a_readme_example_runs(source):
    server = Server("--admin")
    try:
        code = source.replace("port=7878", f"port={server.port}")
        assert code != source, "an example that does not connect to port 7878"
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})
        assert out.getvalue().strip(), "an example that prints nothing"
    finally:
        server.stop()
