from django.urls import path

from selection.evaluation import views as views_evaluation
from selection.evaluation import views_jobs
from selection.memory import views as views_units
from selection.memory.writes import views as views_memory
from selection.traces import views as trace_views
from selection.traces import views_chain, views_compare, views_glossary, views_labelling, views_retention

urlpatterns: list = []

# --- evaluations (selection/evaluation/views.py) ---
urlpatterns += [
    path("evaluations/", views_evaluation.evaluation_index, name="evaluation-index"),
    path(
        "corpora/<slug:name>/evaluations/",
        views_evaluation.evaluation_list,
        name="evaluation-list",
    ),
    path(
        "corpora/<slug:name>/evaluations/run/",
        views_evaluation.evaluation_create,
        name="evaluation-create",
    ),
    path("evaluations/<int:pk>/", views_evaluation.evaluation_detail, name="evaluation-detail"),
]
# --- end evaluations ---

# --- trace explorer (selection/traces/views.py) ---
urlpatterns += [
    path("glossary/", views_glossary.glossary, name="glossary"),
    path("traces/", trace_views.trace_list, name="trace-list"),
    path("traces/chain/", views_chain.trace_chain, name="trace-chain"),
    path(
        "traces/export.<str:fmt>",
        trace_views.trace_search_export,
        name="trace-search-export",
    ),
    path("traces/diff/", views_compare.trace_diff_view, name="trace-diff"),
    path("traces/unlabelled/", views_labelling.trace_queue, name="trace-queue"),
    path("traces/<int:pk>/label/", views_labelling.trace_label, name="trace-label"),
    path("traces/<int:pk>/", trace_views.trace_detail, name="trace-detail"),
    path("traces/<int:pk>/verify/", views_compare.trace_verify, name="trace-verify"),
    path(
        "traces/<int:pk>/counterfactual/<str:unit_uid>/",
        views_compare.trace_counterfactual,
        name="trace-counterfactual",
    ),
    path("traces/<int:pk>/now/", views_compare.trace_now, name="trace-now"),
    path("traces/<int:pk>/export.<str:fmt>", trace_views.trace_export, name="trace-export"),
]
# --- end trace explorer ---

# --- jobs and corpus upload (selection/evaluation/views_jobs.py) ---
urlpatterns += [
    path("jobs/<int:pk>/", views_jobs.job_detail, name="job-detail"),
    path("corpora/upload/", views_jobs.corpus_upload, name="corpus-upload"),
]
# --- end jobs ---

# --- units (selection/memory/views.py) ---
urlpatterns += [
    path("corpora/<slug:name>/units/<str:uid>/", views_units.unit_detail, name="unit-detail"),
    path("corpora/<slug:name>/units/<str:uid>/erase/", views_units.unit_erase_view, name="unit-erase"),
    path("projects/<slug:slug>/retention/", views_retention.project_retention, name="project-retention"),
]
# --- end units ---

# --- memory writes (selection/memory/writes/views.py) ---
urlpatterns += [
    path("projects/<slug:slug>/memory/", views_memory.project_memory, name="project-memory"),
    path("projects/<slug:slug>/memory/admit/", views_memory.memory_queue, name="memory-queue"),
    path("projects/<slug:slug>/memory/<str:uid>/supersede/", views_memory.memory_supersede, name="memory-supersede"),
    path("projects/<slug:slug>/memory/<str:uid>/decide/", views_memory.memory_decide, name="memory-decide"),
]
# --- end memory writes ---
