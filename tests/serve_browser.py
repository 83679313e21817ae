"""Headless Debian chromium for the desk's tests, driven by Selenium through the Debian
``chromedriver`` (an explicit service and binary: Selenium Manager never downloads anything)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CHROMEDRIVER = "/usr/bin/chromedriver"


def chromium_binary() -> str:
    """The Debian ``chromium`` (its launcher script: the flags and paths the package sets)."""
    for name in ("chromium", "chromium-browser"):
        p = shutil.which(name)
        if p:
            return p
    msg = "chromium not installed (apt-get install chromium chromium-driver)"
    raise RuntimeError(msg)


@contextmanager
def browser(width: int = 1440, height: int = 900) -> Iterator[Any]:
    """A headless chromium window of ``width`` x ``height`` CSS pixels."""
    os.environ["SE_OFFLINE"] = "1"  # (Selenium Manager: never look anything up)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium_binary()
    with tempfile.TemporaryDirectory(prefix="newsflow-chromium-") as profile:
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  f"--user-data-dir={profile}", f"--window-size={width},{height}", "--hide-scrollbars"):
            opts.add_argument(a)
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
        try:
            driver.set_window_size(width, height)
            yield driver
        finally:
            driver.quit()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(*args: str, timeout: float = 60.0) -> Iterator[str]:
    """``newsflow serve ARGS --port P`` in a process; yields its base URL once it answers."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "newsflow.cli.main", "serve", *args, "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert proc.poll() is None, proc.communicate()[0].decode()
            try:
                with urllib.request.urlopen(base + "/healthz", timeout=2):
                    break
            except urllib.error.HTTPError:  # (it answers: 401 without the token)
                break
            except OSError:
                assert time.monotonic() < deadline, "newsflow serve did not answer"
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
