"""``conductor pty serve [--bind ADDRESS] [--port N]``: the answer page for a phone
(app.front.web over app.run.answer_desk), for as long as the command runs.

Registered on the ``pty`` group by ``app.front.cli.main``.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

import click

from app.base.errors import ConductorError
from app.front.cli.context import Context, friendly_errors, read_config


@click.command()
@click.option("--bind", "address", metavar="ADDRESS", default=None,
              help="The IP address to listen on (default: serve.address, 127.0.0.1). Name "
                   "another one (a Tailscale address) only for a network you trust.")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="The TCP port (default: serve.port; 0 takes any free port).")
@click.pass_obj
@friendly_errors
def serve(obj: Context, address: str | None, port: int | None) -> None:
    """Serve a page that lists the panes asking you something, with one link per option; a
    link presses that option once, only in the dialog it was made for. Runs until stopped;
    nothing listens otherwise."""
    from app.act.answer_links import LinkKeys
    from app.front import web
    from app.run.answer_desk import AnswerDesk
    from app.run.configfile import check_address

    cfg = read_config()
    if address is None:
        bind = check_address(cfg.serve.address)
    else:
        try:
            bind = check_address(address)
        except ConductorError as exc:
            raise click.BadParameter(str(exc), param_hint="--bind") from None
    links = LinkKeys(obj.workers_dir)
    desk = AnswerDesk(obj.tmux(), obj.workers_dir, cfg.watch, links, cfg.serve.link_ttl_s)
    try:
        server = web.make_server(desk, links, bind, cfg.serve.port if port is None else port,
                                 cfg.serve.bad_per_minute)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {bind}: {exc.strerror or exc}") from None

    def stop(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    click.echo(f"answer page: {web.page_url(server, links)}", nl=True)
    click.echo("(the address holds the page's key; stop with Ctrl-C)", err=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
