"""What bench/acceptance.py and bench/residuals.py share: the error a file they cannot use raises, and writing a
report to --out or to stdout."""
import sys


class BadInput(Exception):
    """the message names the file (and line) and what is wrong with it"""


def emit(text, out_path=None):
    if out_path:
        with open(out_path, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
