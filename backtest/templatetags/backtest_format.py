"""Numbers as the backtest pages and the CLI print them (rules.gate_verdict.fmt and signed)."""

from django import template

from rules import gate_verdict as gates

register = template.Library()


@register.filter
def metric(value):
    return "—" if value is None else gates.fmt(float(value))


@register.filter
def signed(value):
    return "—" if value is None else gates.signed(float(value))


@register.filter
def direction(value):
    """up, down or same: a CSS class for a delta."""
    if value is None:
        return ""
    if value > gates.EPSILON:
        return "up"
    if value < -gates.EPSILON:
        return "down"
    return "same"
