"""The governance pages: projects, frames, proposals, the audit log, API tokens, webhooks."""

from django.urls import path

from . import views, views_tokens

urlpatterns = [
    path("", views.home, name="home"),
    path("projects/<slug:slug>/", views.project_detail, name="project-detail"),
    path("projects/<slug:slug>/frames/diff/", views.frame_diff, name="frame-diff"),
    path("projects/<slug:slug>/propose/", views.proposal_create, name="proposal-create"),
    path("projects/<slug:slug>/propose/preview/", views.proposal_preview, name="proposal-preview"),
    path("projects/<slug:slug>/proposals/", views.proposal_list, name="proposal-list"),
    path("proposals/<int:pk>/promote/", views.proposal_promote, name="proposal-promote"),
    path("proposals/<int:pk>/resubmit/", views.proposal_resubmit, name="proposal-resubmit"),
    path("proposals/<int:pk>/split/", views.proposal_split, name="proposal-split"),
    path("proposals/<int:pk>/close/", views.proposal_close, name="proposal-close"),
    path("projects/<slug:slug>/webhooks/", views.project_webhooks, name="project-webhooks"),
    path("projects/<slug:slug>/rollback/", views.proposal_rollback, name="proposal-rollback"),
    path("audit/", views.audit_log, name="audit-log"),
    path("settings/tokens/", views_tokens.token_list, name="api-tokens"),
    path("settings/tokens/new/", views_tokens.token_create, name="api-token-create"),
    path("settings/tokens/<int:pk>/revoke/", views_tokens.token_revoke, name="api-token-revoke"),
]
