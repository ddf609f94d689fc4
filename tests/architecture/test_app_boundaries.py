"""The app-boundaries import contract (tests/architecture/app_boundaries.py) on a small package of apps."""

from __future__ import annotations

import sys
import textwrap

import grimp
import pytest

from tests.architecture.app_boundaries import AppBoundariesContract

FILES = {
    "__init__.py": "",
    "core/__init__.py": "",
    "core/access.py": "def require_role(): ...\n",
    "core/helpers.py": "def helper(): ...\n",
    "books/__init__.py": "",
    "books/models.py": "class Book: ...\n",
    "books/services.py": "def book_create(): ...\ndef _check(): ...\n",
    "books/views.py": "def book_list(): ...\n",
    "books/_internal.py": "X = 1\n",
    "books/selectors/__init__.py": "",
    "books/selectors/shelves.py": "def shelf(): ...\n",
    "books/selectors/_cache.py": "CACHE = {}\n",
    "shop/__init__.py": "",
    "shop/views.py": """
        from tbcontract.books.models import Book
        from tbcontract.books.services import (
            book_create,
            _check,
        )
        from tbcontract.books.views import book_list
        from tbcontract.books import _internal
        from tbcontract.core.access import require_role
        from tbcontract.core.helpers import helper
        from tbcontract.shop.helpers import local
        from tbcontract.books.selectors.shelves import shelf
        from tbcontract.books.selectors import _cache
    """,
    "shop/helpers.py": "def local(): ...\nfrom tbcontract.shop import views\n",
}


@pytest.fixture
def graph(tmp_path, monkeypatch):
    for name, text in FILES.items():
        path = tmp_path / "tbcontract" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield grimp.build_graph("tbcontract", cache_dir=None)
    for module in [m for m in sys.modules if m.startswith("tbcontract")]:
        del sys.modules[module]


def _contract(**options) -> AppBoundariesContract:
    return AppBoundariesContract(
        name="app boundaries",
        session_options={},
        contract_options={
            "apps_package": "tbcontract",
            "public_modules": ["services", "selectors", "models"],
            "shared_modules": ["tbcontract.core.access"],
            **options,
        },
    )


def test_only_front_doors_and_public_names_cross_between_apps(graph):
    check = _contract().check(graph, verbose=False)

    assert check.kept is False
    assert [(v["imported"], v["line"], v["reason"]) for v in check.metadata["violations"]] == [
        ("tbcontract.books._internal", 8, "not a public module of app 'books': tbcontract.books._internal"),
        ("tbcontract.books._internal", 8, "private name _internal"),
        ("tbcontract.books.selectors._cache", 13, "private module _cache"),
        ("tbcontract.books.selectors._cache", 13, "private name _cache"),
        ("tbcontract.books.services", 3, "private name _check"),
        ("tbcontract.books.views", 7, "not a public module of app 'books': tbcontract.books.views"),
        ("tbcontract.core.helpers", 10, "not a public module of app 'core': tbcontract.core.helpers"),
    ]
    assert {v["importer"] for v in check.metadata["violations"]} == {"tbcontract.shop.views"}


def test_ignored_imports_are_temporary_exceptions(graph):
    check = _contract(
        ignore_imports=[
            "tbcontract.shop.views -> tbcontract.books._internal",
            "tbcontract.shop.views -> tbcontract.books.services",
            "tbcontract.shop.views -> tbcontract.books.views",
            "tbcontract.shop.views -> tbcontract.core.helpers",
            "tbcontract.shop.views -> tbcontract.books.selectors._cache",
        ]
    ).check(graph, verbose=False)

    assert (check.kept, check.ignored_import_count) == (True, 5)
