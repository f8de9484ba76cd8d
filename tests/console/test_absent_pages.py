"""Without a Schema Registry, an authorizer or a SASL listener, the schema, ACL and user
pages are absent: no link in the navigation, and a plain "not found" at their URLs."""

from __future__ import annotations

import subprocess
import sys

import httpx

from tests.console.conftest import JSON


def test_schema_acl_and_user_pages_are_absent(client: httpx.Client) -> None:
    start = client.get("/").text
    for path in ("/schemas", "/acls", "/users"):
        assert f'href="{path}"' not in start
        answer = client.get(path)
        assert answer.status_code == 404 and "not found" in answer.text and "Traceback" not in answer.text
        assert client.get(path, headers=JSON).status_code == 404


def test_console_command_refuses_a_bad_security_setting() -> None:
    done = subprocess.run([sys.executable, "-m", "streamkit", "console", "-b", "127.0.0.1:1", "--port", "0",
                           "-X", "security.protocol=SASL_PLAIN"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "security.protocol=SASL_PLAIN" in done.stderr and "Traceback" not in done.stderr
