"""`python -m gpuwhy` and the `gpuwhy` command (its console script calls `run`).

The command's modules are imported inside `run`: a Ctrl-C while they load (the first tens of
milliseconds) ends gpuwhy with its one line and exit code 130, as later, not a traceback.
"""

import sys


def run() -> None:
    try:
        from gpuwhy.cli import console_main
    except KeyboardInterrupt:
        from gpuwhy.errors import interrupted

        sys.exit(interrupted())
    console_main()


if __name__ == "__main__":
    run()
