"""Serve plotly.js from the installed ``plotly`` package as ``static/vendor/plotly.min.js``.

The product must work with no internet, so charts never load a CDN. Rather than committing a
4 MB generated file, this finder exposes the copy that ships inside the plotly wheel (always the
version the Python figures were built with); ``collectstatic`` copies it for production.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

VENDOR_PATH = "vendor/plotly.min.js"


def _plotly_dir() -> Path:
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data"


class PlotlyFinder(BaseFinder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=str(_plotly_dir()))
        self.storage.prefix = "vendor"  # type: ignore[attr-defined]  # django-stubs: set as Django's finders do

    def check(self, **kwargs: Any) -> list[Any]:
        return []

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> Any:
        find_all = find_all or bool(kwargs.get("all"))  # Django 5.2 still passes ``all``
        if path != VENDOR_PATH:
            return [] if find_all else None
        match = str(_plotly_dir() / "plotly.min.js")
        if not Path(match).exists():
            return [] if find_all else None
        return [match] if find_all else match

    def list(self, ignore_patterns: Any) -> Any:
        if (_plotly_dir() / "plotly.min.js").exists():
            yield "plotly.min.js", self.storage
