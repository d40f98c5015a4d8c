"""Webhooks cannot reach inside: every internal address form is refused, at creation when the URL
spells an address and at delivery for whatever the host resolves to then, over a real local HTTP
receiver that must receive nothing; the allow-list lets one through; no redirect is followed."""

from __future__ import annotations

import socket
import time

import pytest
from django.urls import reverse

from authority.errors import InputRefused
from governance.models import WebhookDelivery
from governance.webhooks import services as webhooks
from governance.webhooks import transport
from governance.webhooks.targets import Target, TargetRefused, target_checked
from tests.receiver import Receiver

pytestmark = pytest.mark.django_db

EVENTS = ["proposal.submitted"]

# (URL with {port} for the receiver's port, what it is); every one of them is refused
INTERNAL = [
    ("http://127.0.0.1:{port}/hook", "IPv4 loopback"),
    ("http://2130706433:{port}/hook", "loopback as one decimal integer"),
    ("http://0x7f000001:{port}/hook", "loopback as one hex integer"),
    ("http://017700000001:{port}/hook", "loopback as one octal integer"),
    ("http://0x7f.1:{port}/hook", "loopback, hex shorthand"),
    ("http://0177.0.0.1:{port}/hook", "loopback, octal first part"),
    ("http://127.1:{port}/hook", "loopback, two-part shorthand"),
    ("http://127.0.0.2:{port}/hook", "elsewhere in 127/8"),
    ("http://[::ffff:127.0.0.1]:{port}/hook", "IPv4-mapped IPv6 loopback"),
    ("http://[::ffff:7f00:1]:{port}/hook", "IPv4-mapped IPv6 loopback, hex"),
    ("http://[::127.0.0.1]:{port}/hook", "IPv4-compatible IPv6 loopback"),
    ("http://[2002:7f00:1::]:{port}/hook", "6to4 of loopback"),
    ("http://localhost:{port}/hook", "a name that resolves to loopback"),
    ("http://[::1]:{port}/hook", "IPv6 loopback"),
    ("http://0.0.0.0:{port}/hook", "unspecified (Linux connects it to loopback)"),
    ("http://0:{port}/hook", "unspecified, one integer"),
    ("http://[::]:{port}/hook", "IPv6 unspecified"),
    ("http://169.254.169.254/latest/meta-data/", "cloud metadata, link-local"),
    ("http://[fe80::1]/hook", "IPv6 link-local"),
    ("http://10.0.0.1/hook", "private 10/8"),
    ("http://172.16.0.1/hook", "private 172.16/12"),
    ("http://192.168.1.1/hook", "private 192.168/16"),
    ("http://100.64.0.1/hook", "shared address space (carrier NAT)"),
    ("http://[fd00::1]/hook", "IPv6 unique local"),
    ("http://224.0.0.1/hook", "IPv4 multicast"),
    ("http://[ff02::1]/hook", "IPv6 multicast"),
    ("http://240.0.0.1/hook", "reserved 240/4"),
    ("http://255.255.255.255/hook", "broadcast"),
]


@pytest.fixture
def plain_http(settings):
    """Plain http on (a development setting) and no allow-list: what is refused is the address."""
    settings.FG_WEBHOOK_ALLOW_HTTP = True
    settings.FG_WEBHOOK_ALLOWED_HOSTS = []
    return settings


def _attempt_all() -> list[WebhookDelivery]:
    for delivery in WebhookDelivery.objects.order_by("pk"):
        assert webhooks.webhook_attempt(delivery_id=delivery.pk)  # refused: done, never retried
    return list(WebhookDelivery.objects.select_related("endpoint").order_by("pk"))


def test_every_internal_address_form_is_refused_at_delivery_and_the_receiver_gets_nothing(
    plain_http, project, users, submit, client
):
    assert len(INTERNAL) >= 15
    with Receiver() as receiver:
        port = receiver.server.server_address[1]
        urls = [form.format(port=port) for form, _ in INTERNAL]
        # added while an allow-list let everything through (as a name may resolve outside when
        # added and inside when delivered to): the delivery is what judges the address
        plain_http.FG_WEBHOOK_ALLOWED_HOSTS = ["0.0.0.0/0", "::/0"]
        for url in urls:
            webhooks.webhook_create(project=project, lead=users["lead"], url=url, events=EVENTS)
        plain_http.FG_WEBHOOK_ALLOWED_HOSTS = []
        submit()
        deliveries = _attempt_all()
        time.sleep(0.2)  # a connection in flight would have landed by now
        assert receiver.requests == []
    assert len(deliveries) == len(INTERNAL)
    for delivery, (_form, what) in zip(deliveries, INTERNAL, strict=True):
        assert delivery.status == "failed" and delivery.attempts == 1, what
        assert delivery.last_error.startswith("refused: ") and "address" in delivery.last_error, what
        assert delivery.last_status_code is None, what
    assert "a loopback address" in deliveries[0].last_error
    assert "169.254.169.254, a link-local address" in deliveries[17].last_error

    # the page shows each endpoint's refusal and the log each delivery's
    client.force_login(users["lead"])
    html = client.get(reverse("project-webhooks", args=[project.slug])).content.decode()
    assert html.count('class="error refusal"') == len(INTERNAL)
    assert "resolves to 127.0.0.1, a loopback address: refused" in html
    listed = client.get(f"/api/v1/projects/{project.slug}/webhooks").json()
    assert all(w["refusal"].startswith("refused: ") for w in listed["webhooks"])
    assert {d["status"] for d in listed["deliveries"]} == {"failed"}


@pytest.mark.parametrize("form", [f for f, _ in INTERNAL if "localhost" not in f])
def test_an_address_literal_inside_is_refused_when_the_webhook_is_added(plain_http, project, users, form):
    with pytest.raises(InputRefused, match="public addresses only") as refused:
        webhooks.webhook_create(project=project, lead=users["lead"], url=form.format(port=8080), events=EVENTS)
    assert refused.value.field == ("url",)


def test_the_allow_list_lets_a_listed_address_through_and_the_receiver_gets_the_delivery(
    plain_http, project, users, submit
):
    plain_http.FG_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    with Receiver() as receiver, Receiver() as unlisted:
        webhooks.webhook_create(project=project, lead=users["lead"], url=receiver.url, events=EVENTS)
        other = unlisted.url.replace("127.0.0.1", "[::ffff:127.0.0.2]")
        plain_http.FG_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1", "::ffff:127.0.0.2"]
        webhooks.webhook_create(project=project, lead=users["lead"], url=other, events=EVENTS)
        plain_http.FG_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
        submit()
        allowed, refused = _attempt_all()
        assert len(receiver.requests) == 1 and unlisted.requests == []
    assert (allowed.status, allowed.last_status_code) == ("delivered", 200)
    assert refused.status == "failed" and "127.0.0.2" in refused.last_error


def test_https_is_required_unless_plain_http_is_on_for_development(settings, project, users, submit):
    settings.FG_WEBHOOK_ALLOW_HTTP = False
    settings.FG_WEBHOOK_ALLOWED_HOSTS = []
    with pytest.raises(InputRefused, match="plain http is off"):
        webhooks.webhook_create(project=project, lead=users["lead"], url="http://example.com/h", events=EVENTS)
    with pytest.raises(InputRefused, match="carries credentials"):
        webhooks.webhook_create(project=project, lead=users["lead"], url="https://u:p@example.com/", events=EVENTS)
    webhooks.webhook_create(project=project, lead=users["lead"], url="https://example.com/h", events=EVENTS)
    # an http endpoint kept from a development set-up is refused once plain http is off
    settings.FG_WEBHOOK_ALLOW_HTTP = True
    webhooks.webhook_create(project=project, lead=users["lead"], url="http://example.com/h", events=EVENTS)
    settings.FG_WEBHOOK_ALLOW_HTTP = False
    with pytest.raises(TargetRefused, match="plain http is off"):
        target_checked("http://example.com/h")


def test_a_redirect_is_recorded_and_not_followed(plain_http, project, users, submit):
    plain_http.FG_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    inside = Receiver()
    with inside, Receiver(statuses=(302,), headers={"Location": inside.url}) as hop:
        webhooks.webhook_create(project=project, lead=users["lead"], url=hop.url, events=EVENTS)
        submit()
        [delivery] = WebhookDelivery.objects.all()
        assert webhooks.webhook_attempt(delivery_id=delivery.pk) is False  # retried, like any failure
        assert len(hop.requests) == 1 and inside.requests == []
    delivery.refresh_from_db()
    assert delivery.last_status_code == 302 and "redirects are not followed" in delivery.last_error


def test_the_delivery_connects_to_the_checked_address_and_times_out_on_a_silent_server(settings):
    # the checked address is the one connected to: the host name is only the Host header (and TLS's
    # server name), never resolved a second time
    with Receiver() as receiver:
        port = receiver.server.server_address[1]
        pinned = Target(scheme="http", host="name.invalid", port=port, path="/hook", addresses=("127.0.0.1",))
        answer = transport.post(pinned, b"{}", {"Content-Type": "application/json"}, connect_timeout=2, read_timeout=2)
        assert answer.status == 200 and receiver.requests[0]["headers"]["host"] == f"name.invalid:{port}"
    # a server that accepts and never answers: the read time-out ends the attempt
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    try:
        target = Target(
            scheme="http", host="127.0.0.1", port=silent.getsockname()[1], path="/", addresses=("127.0.0.1",)
        )
        started = time.monotonic()
        answer = transport.post(target, b"{}", {}, connect_timeout=1, read_timeout=0.5)
        assert answer.status is None and "timed out" in answer.error and time.monotonic() - started < 3
    finally:
        silent.close()
