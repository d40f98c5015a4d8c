from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from . import views

urlpatterns = [
    path("", views.home, name="home"),
    path("projects/<slug:slug>/", views.project_detail, name="project-detail"),
    path("projects/<slug:slug>/frames/diff/", views.frame_diff, name="frame-diff"),
    path("projects/<slug:slug>/propose/", views.proposal_create, name="proposal-create"),
    path("projects/<slug:slug>/proposals/", views.proposal_list, name="proposal-list"),
    path("proposals/<int:pk>/promote/", views.proposal_promote, name="proposal-promote"),
    path("audit/", views.audit_log, name="audit-log"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("", include("selection.urls")),
    path("", include("backtest.urls")),
]
