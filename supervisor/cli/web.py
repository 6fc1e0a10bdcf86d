"""``agentd web``: the dashboard's URL (the running daemon starts serving it if it was not)."""

from __future__ import annotations

import json

import click

from .context import AppContext, client_call, daemon_running, pass_app


@click.command(epilog="""\b
Examples:
  agentd web                    # serve the dashboard (if not yet) and print its URL with the token
  agentd web --open             # ... and open it in a browser
  agentd web --stop             # stop serving it (the daemon goes on)
  curl -H "Authorization: Bearer $(cat .agentd/web-token)" http://127.0.0.1:8765/metrics""")
@click.option("--open", "open_browser", is_flag=True, help="open the URL in a browser")
@click.option("--stop", is_flag=True, help="stop serving the dashboard (the daemon and the units go on)")
@click.option("--json", "as_json", is_flag=True, help="one JSON object: the URL, where it listens, the token file")
@pass_app
def web(app: AppContext, open_browser: bool, stop: bool, as_json: bool) -> None:
    """Serve the dashboard from the running daemon and print its URL.

    The daemon serves it on [web] listen/port (default 127.0.0.1:8765) until
    it stops, or from its start with [web] enabled = true.  The URL carries
    a token (kept in [web] token_file, default .agentd/web-token): without it
    every page, the API and /metrics answer 401.  A listen address other than
    loopback makes the dashboard reachable from other machines, still only
    with the token (and without TLS: put a TLS proxy in front).
    """
    paths = app.paths
    if not daemon_running(paths):
        raise click.ClickException("agentd is not running: `agentd start` first (the daemon serves the dashboard)")
    info = client_call(paths, "web", timeout=30.0, stop=stop)
    assert isinstance(info, dict)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    if stop:
        click.echo("agentd web: stopped serving the dashboard")
        return
    click.echo(f"agentd web: {info['url']}")
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
