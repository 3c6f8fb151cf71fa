"""A ZIP archive's entry names (``service.domain.archive_names``): whatever a name holds, no entry
leaves the folder it is extracted to, and no two entries of one folder share a name."""

from __future__ import annotations

import posixpath

from service.domain.archive_names import flat_entries, safe_part, tree_entries
from service.domain.records import FileRecord, FolderRecord


def _file(file_id: str, name: str, folder_id: str | None = None, at: int = 1) -> FileRecord:
    return FileRecord(file_id, name, 1, "text/plain", "0" * 64, at, folder_id)


def test_a_part_never_climbs_out_or_names_a_root() -> None:
    for name in ("..", ".", "", "   ", "/", "\\"):
        assert safe_part(name) == "_"
    assert safe_part("../../etc/passwd") == ".._.._etc_passwd"
    assert safe_part("C:\\Windows\\x") == "C:_Windows_x"
    assert safe_part("tab\there\x00nul") == "tab_here_nul"
    assert safe_part(".profile") == ".profile"


def test_every_path_stays_inside_the_archive() -> None:
    files = [_file(f"fil_{n}", name) for n, name in enumerate(["..", "/abs", "a/../../b", "."])]
    for entry in flat_entries(files):
        normal = posixpath.normpath(entry.path)
        assert not normal.startswith(("/", "..")) and "/" not in entry.path, entry.path


def test_duplicates_are_numbered_ignoring_case_before_the_extension() -> None:
    names = ["a.txt", "A.TXT", "a.txt", "archive.tar.gz", "archive.tar.gz", ".env", ".env"]
    files = [_file(f"fil_{n}", name) for n, name in enumerate(names)]
    assert [entry.path for entry in flat_entries(files)] == [
        "a.txt",
        "A (2).TXT",
        "a (3).txt",
        "archive.tar.gz",
        "archive.tar (2).gz",
        ".env",
        ".env (2)",
    ]


def test_a_tree_is_paths_of_folder_names_and_a_file_never_takes_a_folders_name() -> None:
    folders = [
        FolderRecord("fld_b", "Sub", "fld_top", 1, 5),
        FolderRecord("fld_c", "..", "fld_b", 1, 6),
        FolderRecord("fld_away", "Away", None, 1, 7),
    ]
    files = [
        _file("fil_1", "sub", "fld_top", at=1),
        _file("fil_2", "x.txt", "fld_c", at=2),
        _file("fil_3", "y.txt", "fld_away", at=3),
    ]
    entries = tree_entries("fld_top", folders, files)
    assert [(entry.path, entry.file and entry.file.id) for entry in entries] == [
        ("Sub/", None),
        ("sub (2)", "fil_1"),
        ("Sub/_/", None),
        ("Sub/_/x.txt", "fil_2"),
    ]
    assert entries[0].modified == 5
