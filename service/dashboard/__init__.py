"""The web dashboard: the sign-in page, the API keys, files, sessions and activity pages, and the
page for an address it does not have, served by the service itself.

Plain HTML, CSS and JavaScript in ``static/`` with no build step; the pages talk to the JSON API
under ``/api/v1`` like any other client. See ``routes.add_dashboard_routes``.
"""

from service.dashboard.routes import add_dashboard_routes

__all__ = ["add_dashboard_routes"]
