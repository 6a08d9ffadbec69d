"""``accelboard prices import FILE [--format opencost|instances]`` and ``accelboard prices default``.

A thin edge over ``costs.pricebook_services``: the whole file is imported or nothing, and every
error is printed as "line N, column C: message" (exit status 1).
"""

from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from accelboard.costs.models import AcceleratorPrice
from accelboard.costs.pricebook_services import FORMATS, PriceImportError, pricebook_csv_import

DEFAULT_BOOK = Path(__file__).resolve().parents[2] / "data" / "default_pricebook.csv"


class Command(BaseCommand):
    help = "Import accelerator prices into the price book (OpenCost price sheet or a cloud instance CSV)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        imp = sub.add_parser("import", help="Import a price CSV, all rows or none")
        imp.add_argument("file", type=Path)
        imp.add_argument("--format", choices=FORMATS, default="instances")
        imp.add_argument(
            "--provider", default="", help="Provider of rows without a provider column (aws, gcp, ...)"
        )
        imp.add_argument("--currency", default="USD")
        imp.add_argument("--source", default="", help="Where the prices were read (URL, catalogue and date)")
        imp.add_argument("--pricing-model", default="on-demand")
        default = sub.add_parser(
            "default", help="Load the price book shipped with accelboard (public list prices)"
        )
        default.add_argument(
            "--if-empty",
            action="store_true",
            help="only when the book has no accelerator price yet (first start of a deployment)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        today = timezone.now().date()
        if options["action"] == "default":
            if options["if_empty"] and AcceleratorPrice.objects.exists():
                self.stdout.write("the price book already has prices: the shipped book was not loaded")
                return
            path, fmt, extra = DEFAULT_BOOK, "instances", {}
        else:
            path, fmt = options["file"], options["format"]
            extra = {
                "provider": options["provider"],
                "currency": options["currency"],
                "source": options["source"],
                "pricing_model": options["pricing_model"],
            }
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{path}: {exc}") from None
        try:
            result = pricebook_csv_import(text=text, format=fmt, today=today, **extra)
        except PriceImportError as exc:
            for line in exc.errors:
                self.stderr.write(f"{path}: {line}")
            raise CommandError(f"{path}: nothing imported ({len(exc.errors)} error(s))") from None
        self.stdout.write(
            f"{path}: {result.created} price row(s) imported, {result.stale} stale (fetched > 30 days ago); "
            f"{result.days_to_recompute} costed day(s) queued for recompute"
        )
