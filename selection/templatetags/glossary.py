"""`{% code X %}`: a code or term linked to its glossary entry, its one-line meaning the tooltip
(title); a code the glossary lacks renders as plain <code>."""

from __future__ import annotations

from django import template
from django.urls import reverse
from django.utils.html import format_html

from selection.engine.explain.glossary import anchor, lookup

register = template.Library()


@register.simple_tag
def code(value) -> str:
    text = "" if value is None else str(value)
    entry = lookup(text)
    if entry is None:
        return format_html("<code>{}</code>", text)
    return format_html(
        '<a class="gloss" href="{}#{}" title="{}"><code>{}</code></a>',
        reverse("glossary"),
        anchor(entry.key),
        entry.line,
        text,
    )


@register.filter
def gloss(value) -> str:
    """The one-line meaning of a code ("" when the glossary lacks it): a title attribute's text."""
    entry = lookup("" if value is None else str(value))
    return entry.line if entry else ""
