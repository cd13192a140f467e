"""The registry's promise for Matrix (issue 28): outside its own folders (the adapter's and its
fake homeserver's) the platform is named in at most three files — its declaration, the
registry's list and config's section. Counted as ``grep -ril matrix`` counts, over vigil's
Python modules (the built web chat's bundle says ``feColorMatrix``, an SVG filter)."""

from __future__ import annotations

from pathlib import Path

import vigil

OWN = ("gateway/adapters/matrix/", "testing/matrix_api/")


def test_matrix_is_named_in_at_most_three_files_outside_its_own_folders() -> None:
    package = Path(vigil.__file__).parent
    naming = sorted(
        str(path.relative_to(package)) for path in package.rglob("*.py")
        if "__pycache__" not in path.parts and not str(path.relative_to(package)).startswith(OWN)
        and "matrix" in path.read_text(errors="replace").lower()
    )
    assert naming == ["config/settings.py", "platforms/__init__.py", "platforms/matrix.py"]
