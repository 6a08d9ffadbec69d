"""The API's pages (django-ninja ``@paginate``): ``?page=`` and ``?page_size=`` in, and
``{"count", "next", "previous", "items"}`` out, the links being the same query with another page."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest
from ninja import Field, Schema
from ninja.pagination import PaginationBase

PAGE_SIZE = 50
PAGE_SIZE_MAX = 500


class PageNumbers(PaginationBase):
    class Input(Schema):
        page: int = Field(1, ge=1, le=1_000_000)
        page_size: int = Field(PAGE_SIZE, ge=1, le=PAGE_SIZE_MAX)

    class Output(Schema):
        count: int
        next: str | None
        previous: str | None
        items: list[Any]

    def paginate_queryset(
        self, queryset: QuerySet[Any], pagination: Input, request: HttpRequest, **params: Any
    ) -> dict[str, Any]:
        count = queryset.count()
        offset = (pagination.page - 1) * pagination.page_size

        def link(number: int) -> str:
            query = request.GET.copy()
            query["page"] = str(number)
            return request.build_absolute_uri(f"{request.path}?{query.urlencode()}")

        return {
            "count": count,
            "next": link(pagination.page + 1) if offset + pagination.page_size < count else None,
            "previous": link(pagination.page - 1) if pagination.page > 1 and count else None,
            "items": queryset[offset : offset + pagination.page_size],
        }
