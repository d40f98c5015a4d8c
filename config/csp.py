"""One Content-Security-Policy for every response: scripts only from our own static files.

A dozen lines instead of django-csp: the policy is one static string (no inline script means no
nonces to mint), and django-csp's per-view decorators and report handling are not needed.
`style-src` allows inline styles because plotly.js writes its style rules and `style` attributes
at run time and the funnel bars are sized with a `style` width; scripts get no such allowance.
"""

from __future__ import annotations

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response
