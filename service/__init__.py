"""filehost-auth: the authentication core of a file-hosting service.

Layers, each readable on its own: ``api`` (HTTP: routes, request parsing, the error envelope),
``auth`` (policy: credentials, permissions, sessions, keys) and ``store`` (Redis keys and
scripts). ``app.create_app`` wires them; ``cli`` runs them.
"""

from service.app import create_app
from service.config import Settings, load_settings

__all__ = ["Settings", "create_app", "load_settings"]
