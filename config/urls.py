"""The site's URLs: each app's pages, the API, MCP, sign-in and the admin."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from governance.mcp_server import mcp_http

from .api_site import api, unknown_path
from .local_commands import local_command

handler500 = "config.errors.server_error"

urlpatterns = [
    path("", include("governance.urls")),
    path("api/v1/", api.urls),
    path("api/v1/<path:rest>", unknown_path),
    path("local/command", local_command),  # signed, loopback only (config/local_commands.py)
    path("mcp", mcp_http, name="mcp"),
    path("mcp/", mcp_http),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("", include("selection.urls")),
    path("", include("backtest.urls")),
]
