"""The dashboard and ``/metrics``, served by the daemon (``agentd web``; see docs/web.md).

``host.WebHost`` is what the daemon holds (no aiohttp import until it serves);
``routes`` the pages and the API, ``auth`` the token and the origin checks,
``stream`` a page's live events, ``terminal`` the live read-only terminal,
``metrics`` Prometheus, ``model`` the cards and alarms (pure), ``data`` what
the pages read from files.  ``static/`` holds the HTML, CSS and JS, and the
vendored xterm.js (MIT, with its license).
"""
