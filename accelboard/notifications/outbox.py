"""Reading a stored email for the outbox page: pure functions on the message's bytes (no ORM).

The page shows what a mail client would: the headers people read, the HTML part with its inline
images, and the plain-text part. Inline images (``cid:`` references to parts of a
multipart/related) become ``data:`` URLs so that the HTML can be shown in a sandboxed frame that
loads nothing else. Links are made to open in the top window, as a mail client opens them in a
browser tab.
"""

from __future__ import annotations

import base64
import email
import re
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.policy import default as default_policy

SHOWN_HEADERS = ("Subject", "From", "To", "Date", "List-Unsubscribe", "List-Unsubscribe-Post")
_CID = re.compile(r"""(["'(])cid:([^"')\s>]+)""", re.IGNORECASE)
_HEAD = re.compile(r"<head[^>]*>", re.IGNORECASE)


@dataclass
class InlinePart:
    content_id: str
    content_type: str
    size: int


@dataclass
class RenderedEmail:
    headers: list[tuple[str, str]]
    text: str
    html: str
    inline: list[InlinePart] = field(default_factory=list)
    attachments: list[str] = field(default_factory=list)


def _inline_parts(message: EmailMessage) -> dict[str, tuple[str, bytes]]:
    parts: dict[str, tuple[str, bytes]] = {}
    for part in message.walk():
        content_id = part.get("Content-ID")
        if not content_id or part.is_multipart():
            continue
        payload = part.get_payload(decode=True)
        if isinstance(payload, bytes):
            parts[str(content_id).strip().strip("<>")] = (part.get_content_type(), payload)
    return parts


def email_render(raw: bytes) -> RenderedEmail:
    """The parts of ``raw`` (an RFC 5322 message) that the outbox page shows."""
    message = email.message_from_bytes(raw, policy=default_policy)
    assert isinstance(message, EmailMessage)
    headers = [(name, " ".join(str(message[name]).split())) for name in SHOWN_HEADERS if message[name]]
    text_part = message.get_body(preferencelist=("plain",))
    html_part = message.get_body(preferencelist=("html",))
    text = str(text_part.get_content()) if text_part is not None else ""
    html = str(html_part.get_content()) if html_part is not None else ""
    inline = _inline_parts(message)

    def data_url(match: re.Match[str]) -> str:
        found = inline.get(match.group(2))
        if found is None:
            return match.group(0)
        content_type, payload = found
        return f"{match.group(1)}data:{content_type};base64,{base64.b64encode(payload).decode()}"

    if html:
        html = _CID.sub(data_url, html)
        base = '<base target="_top">'
        html = _HEAD.sub(lambda m: m.group(0) + base, html, count=1) if _HEAD.search(html) else base + html
    attachments = [
        part.get_filename() or part.get_content_type()
        for part in message.iter_attachments()
        if not part.get("Content-ID")
    ]
    return RenderedEmail(
        headers=headers,
        text=text,
        html=html,
        inline=[InlinePart(cid, ctype, len(data)) for cid, (ctype, data) in inline.items()],
        attachments=attachments,
    )
