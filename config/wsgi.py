"""WSGI entry point for production servers (gunicorn config.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

# the server loads the model and the corpus indexes now, not on its first request; it answers
# /api/v1/health/ready with 503 until they are loaded
from selection.serving.warm_up import warm_up_start  # noqa: E402 - needs the settings above

warm_up_start()
