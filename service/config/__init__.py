"""Settings read from the environment, validated once at start-up.

``SETTINGS`` (``table.py``) is the one table of them; ``readers.py`` says how each kind of value is
read and bounded; ``settings.py`` holds the ``Settings`` object, its groups and
``load_settings``. A bad setting stops start-up with a message that names it; nothing here is
read per request. Policy objects take only their group of settings (``Settings.sessions``,
``.login``, ...).
"""

from service.config.readers import ConfigError, Network, SecretKeys, available_cores
from service.config.setting import Setting
from service.config.settings import (
    AuditSettings,
    LoginSettings,
    MfaSettings,
    OidcSettings,
    SessionSettings,
    Settings,
    UploadSettings,
    load_settings,
)
from service.config.table import SENTINEL_REPLICA_WAIT_MS, SETTINGS, settings_table

__all__ = [
    "SENTINEL_REPLICA_WAIT_MS",
    "SETTINGS",
    "AuditSettings",
    "ConfigError",
    "LoginSettings",
    "MfaSettings",
    "Network",
    "OidcSettings",
    "SecretKeys",
    "SessionSettings",
    "Setting",
    "Settings",
    "UploadSettings",
    "available_cores",
    "load_settings",
    "settings_table",
]
