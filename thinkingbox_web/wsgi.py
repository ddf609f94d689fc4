"""WSGI entry point (gunicorn thinkingbox_web.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "thinkingbox_web.settings")
application = get_wsgi_application()
