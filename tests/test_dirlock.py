"""The data-directory lock on its own: one holder at a time (also within one process, as
flock locks open files), the holder's pid in the refusal, release, unusable paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streamkit.dirlock import LOCK_FILE, DataDirectoryError, DirectoryLock, DirectoryLocked


def test_one_holder_at_a_time(tmp_path: Path) -> None:
    directory = tmp_path / "data" / "broker"
    first = DirectoryLock(directory).acquire()
    assert (directory / LOCK_FILE).read_text() == f"{os.getpid()}\n"
    with pytest.raises(DirectoryLocked) as refused:
        DirectoryLock(directory).acquire()
    assert refused.value.holder == os.getpid()
    assert str(directory) in str(refused.value) and f"process {os.getpid()}" in str(refused.value)
    first.release()
    assert (directory / LOCK_FILE).read_text() == ""
    with DirectoryLock(directory) as second:
        assert second.held
    assert not second.held


def test_unusable_paths_name_the_path(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(DataDirectoryError, match="is not a directory") as in_the_way:
        DirectoryLock(a_file).acquire()
    assert str(a_file) in str(in_the_way.value)
    with pytest.raises(DataDirectoryError, match="is a file") as under:
        DirectoryLock(a_file / "data").acquire()
    assert str(a_file / "data") in str(under.value)
