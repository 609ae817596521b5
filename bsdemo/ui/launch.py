"""`python -m bsdemo.ui.launch app.py [streamlit run's options]`: `streamlit run`, in this
process, with the lab's process-wide parts started first (bsdemo.server): the workers warm up
and Prometheus's /metrics answers from the server's first second, before any browser. The app
is served through bsdemo.ui.serve, which sends the browser's id cookie HttpOnly."""

from __future__ import annotations

import os
import sys

from bsdemo.server import process_scheduler

SERVE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serve.py")  # run, not imported


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0].startswith("-"):
        print("usage: python -m bsdemo.ui.launch app.py [streamlit run's options]", file=sys.stderr)
        raise SystemExit(2)
    process_scheduler()
    from streamlit.web import cli

    # the script is served through bsdemo.ui.serve: the same app, with the browser's id cookie
    # sent by the server (HttpOnly) instead of written by the page's script
    os.environ["BSDEMO_APP_SCRIPT"] = os.path.abspath(args[0])
    cli.main(["run", SERVE, *args[1:]], prog_name="streamlit")


if __name__ == "__main__":
    main()
