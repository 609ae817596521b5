"""`python -m bsdemo.ui.launch app.py [streamlit run's options]`: `streamlit run`, in this
process, with the lab's process-wide parts started first (bsdemo.server): the workers warm up
and Prometheus's /metrics answers from the server's first second, before any browser."""

from __future__ import annotations

import sys

from bsdemo.server import process_scheduler


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0].startswith("-"):
        print("usage: python -m bsdemo.ui.launch app.py [streamlit run's options]",
              file=sys.stderr)
        raise SystemExit(2)
    process_scheduler()
    from streamlit.web import cli

    cli.main(["run", *args], prog_name="streamlit")


if __name__ == "__main__":
    main()
