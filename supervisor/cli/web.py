"""``agentd web``: the dashboard's URL (the running daemon starts serving it if it was not).

The port: ``--port N`` asks the running daemon for exactly N (it moves a
dashboard it already serves there, or says why it cannot).  Without it the
daemon serves on its ``[web] port`` (read at its start), or on a free port
near it when another program holds it, said on stderr.  ``AGENTD_WEB__PORT``
in this command's environment asks for that port (near it when it is taken):
the daemon's own environment was fixed at its start.
"""

from __future__ import annotations

import json

import click

from .context import AppContext, client_call, daemon_running, pass_app


@click.command(epilog="""\b
Examples:
  agentd web                    # serve the dashboard (if not yet) and print its URL with the token
  agentd web --open             # ... and open it in a browser
  agentd web --stop             # stop serving it (the daemon goes on)
  agentd web --port 8781        # serve it on port 8781 (moves it if it is served elsewhere)
  curl -H "Authorization: Bearer $(cat .agentd/web-token)" http://127.0.0.1:8765/metrics""")
@click.option("--open", "open_browser", is_flag=True, help="open the URL in a browser")
@click.option("--stop", is_flag=True, help="stop serving the dashboard (the daemon and the units go on)")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="serve on this port exactly (0: any free port); without it: [web] port, or a free one near it")
@click.option("--json", "as_json", is_flag=True, help="one JSON object: the URL, where it listens, the token file")
@pass_app
def web(app: AppContext, open_browser: bool, stop: bool, port: int | None, as_json: bool) -> None:
    """Serve the dashboard from the running daemon and print its URL.

    The daemon serves it on [web] listen/port (default 127.0.0.1:8765) until
    it stops, or from its start with [web] enabled = true; when another
    program holds that port (another project's agentd), a free one near it,
    said here.  --port N moves it to exactly N.  The URL carries
    a token (kept in [web] token_file, default .agentd/web-token): without it
    every page, the API and /metrics answer 401.  A listen address other than
    loopback makes the dashboard reachable from other machines, still only
    with the token (and without TLS: put a TLS proxy in front).
    """
    paths = app.paths
    if not daemon_running(paths):
        raise click.ClickException("agentd is not running: `agentd start` first (the daemon serves the dashboard)")
    if stop and port is not None:
        raise click.UsageError("--stop and --port do not go together")
    if stop:
        info = client_call(paths, "web", timeout=30.0, stop=True)
    elif port is not None:
        info = client_call(paths, "web", timeout=30.0, port=port, exact=True)
    else:
        info = client_call(paths, "web", timeout=30.0, port=environment_port())
    assert isinstance(info, dict)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    if stop:
        click.echo("agentd web: stopped serving the dashboard")
        return
    click.echo(f"agentd web: {info['url']}")
    if info.get("moved_from"):
        click.echo(f"  moved from port {info['moved_from']} (pages open there reconnect to nothing: use this URL)",
                   err=True)
    if info.get("note"):
        click.echo(f"  {info['note']}", err=True)
    if info["loopback"]:
        click.echo(f"  on this machine only ({info['listen']}); the token is in {info['token_file']}", err=True)
    else:
        click.echo(f"  reachable from other machines on {info['listen']}:{info['port']}: every request needs the token "
                   f"(in {info['token_file']}); no TLS, put a TLS proxy in front", err=True)
    metrics = "without the token ([web] metrics_public)" if info["metrics_public"] else \
        "with the token (Authorization: Bearer)"
    click.echo(f"  metrics: {info['base']}metrics {metrics}", err=True)
    if open_browser:
        import webbrowser

        webbrowser.open(info["url"])


def environment_port() -> int | None:
    """``AGENTD_WEB__PORT`` of this command's environment, or None (the daemon's own [web] port)."""
    import os

    text = os.environ.get("AGENTD_WEB__PORT")
    if text is None or not text.strip():
        return None
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise click.ClickException(f"AGENTD_WEB__PORT={text!r} is not a port number (0 to 65535; 0: any free port)")
    return port
