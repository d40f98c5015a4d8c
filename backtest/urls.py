from django.urls import path

from . import views
from .health import views as health_views

urlpatterns = [
    path("backtests/<int:pk>/", views.backtest_detail, name="backtest-detail"),
    path("backtests/<int:pk>/live/", views.backtest_live, name="backtest-live"),
    path("backtests/<int:pk>/rerun/", views.backtest_rerun, name="backtest-rerun"),
    path("projects/<slug:slug>/health/", health_views.health_check_request, name="project-health-check"),
]
