from django.urls import path

from . import views, views_health

urlpatterns = [
    path("proposals/<int:pk>/", views.proposal_detail, name="proposal-detail"),
    path("proposals/<int:pk>/review/", views.proposal_review, name="proposal-review"),
    path("proposals/<int:pk>/comments/", views.proposal_comment, name="proposal-comment"),
    path("proposals/<int:pk>/backtest/", views.proposal_backtest_start, name="proposal-backtest-start"),
    path("proposals/<int:pk>/promote/confirm/", views.proposal_promote_confirm, name="proposal-promote-confirm"),
    path("backtests/<int:pk>/", views.backtest_detail, name="backtest-detail"),
    path("backtests/<int:pk>/live/", views.backtest_live, name="backtest-live"),
    path("backtests/<int:pk>/rerun/", views.backtest_rerun, name="backtest-rerun"),
    path("projects/<slug:slug>/health/", views_health.health_check_request, name="project-health-check"),
]
