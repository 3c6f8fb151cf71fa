"""What the tests share, one module per kind of thing: the Redis servers they start
(``redis``, ``cluster``), the in-process app's client (``api``, ``clock``, ``keys``, ``files``,
``raw_http``, ``openapi``, ``metrics``), spawned ``serve`` and CLI processes and clients of them
(``processes``, ``clients``), the dashboard in a browser (``browser``, ``pages``) and the compose
clients (``compose``).

Test modules import helpers from here, never from another test module; ``conftest.py`` files hold
fixtures and hooks and import their helpers from here too (``tests/unit/test_suite_layout.py``).
"""
