"""Examples/Todos in the browser: a view-model written from the tutorial works in
the page with no front-end code of its own. `./dev test` runs this after building
the example, with VIEWLINE_TODO_SERVER set to its todo-server binary."""
from __future__ import annotations

import os
import subprocess
import tempfile

import pytest
from selenium.webdriver.common.by import By

from conftest import free_port
from test_page import dialog, named, run, status, view, wait

TODO_SERVER = os.environ.get("VIEWLINE_TODO_SERVER")

pytestmark = pytest.mark.skipif(not TODO_SERVER, reason="VIEWLINE_TODO_SERVER (Examples/Todos' todo-server) not given")


@pytest.fixture
def todo_url():
    port, web_port = free_port(), free_port()
    directory = tempfile.mkdtemp()
    process = subprocess.Popen([TODO_SERVER, str(port), str(web_port)], cwd=directory, stdout=subprocess.PIPE)
    assert process.stdout.readline().startswith(b"listening on")
    assert process.stdout.readline().startswith(b"web on")
    yield f"http://127.0.0.1:{web_port}/"
    process.terminate()
    process.wait(10)


def test_the_todos_example_works_in_the_page(page, todo_url):
    page.get(todo_url)
    wait(page, lambda: status(page) == "connected")
    run(page, "add", title="buy milk")
    todos = view(page, "todos")
    wait(page, lambda: any("buy milk" in row.text for row in todos.find_elements(By.CSS_SELECTOR, "table tbody tr")))
    headers = [th.text for th in todos.find_elements(By.CSS_SELECTOR, "table th")]
    assert headers == ["id", "title", "done"]
    run(page, "delete", id="1")
    box = wait(page, lambda: dialog(page))
    named(box, "button", "Undo").click()
    wait(page, lambda: dialog(page) is None)
    wait(page, lambda: "buy milk" in todos.text)
