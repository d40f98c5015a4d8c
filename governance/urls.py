"""The governance pages: projects, frames, proposals, the audit log, API tokens, webhooks."""

from django.urls import path

from . import views
from .proposals import editor_views, revert_views
from .proposals import views as proposal_views
from .tokens import views as token_views
from .webhooks import views as webhook_views

urlpatterns = [
    path("", views.home, name="home"),
    path("projects/<slug:slug>/", views.project_detail, name="project-detail"),
    path("projects/<slug:slug>/frames/diff/", views.frame_diff, name="frame-diff"),
    path("projects/<slug:slug>/propose/", editor_views.proposal_create, name="proposal-create"),
    path("projects/<slug:slug>/propose/preview/", editor_views.proposal_preview, name="proposal-preview"),
    path("projects/<slug:slug>/proposals/", proposal_views.proposal_list, name="proposal-list"),
    path("proposals/<int:pk>/", proposal_views.proposal_detail, name="proposal-detail"),
    path("proposals/<int:pk>/review/", proposal_views.proposal_review, name="proposal-review"),
    path("proposals/<int:pk>/comments/", proposal_views.proposal_comment, name="proposal-comment"),
    path("proposals/<int:pk>/backtest/", proposal_views.proposal_backtest_start, name="proposal-backtest-start"),
    path(
        "proposals/<int:pk>/promote/confirm/", proposal_views.proposal_promote_confirm, name="proposal-promote-confirm"
    ),
    path("proposals/<int:pk>/promote/", proposal_views.proposal_promote, name="proposal-promote"),
    path("proposals/<int:pk>/resubmit/", proposal_views.proposal_resubmit, name="proposal-resubmit"),
    path("proposals/<int:pk>/split/", proposal_views.proposal_split, name="proposal-split"),
    path("proposals/<int:pk>/close/", proposal_views.proposal_close, name="proposal-close"),
    path("proposals/<int:pk>/revert/", revert_views.proposal_revert_request, name="proposal-revert-request"),
    path("proposals/<int:pk>/revert/confirm/", revert_views.proposal_revert_confirm, name="proposal-revert-confirm"),
    path("projects/<slug:slug>/webhooks/", webhook_views.project_webhooks, name="project-webhooks"),
    path(
        "projects/<slug:slug>/webhooks/<int:pk>/rotate/",
        webhook_views.webhook_secret_rotate,
        name="project-webhook-rotate",
    ),
    path("projects/<slug:slug>/rollback/", editor_views.proposal_rollback, name="proposal-rollback"),
    path("audit/", views.audit_log, name="audit-log"),
    path("settings/tokens/", token_views.token_list, name="api-tokens"),
    path("settings/tokens/new/", token_views.token_create, name="api-token-create"),
    path("settings/tokens/<int:pk>/revoke/", token_views.token_revoke, name="api-token-revoke"),
]
