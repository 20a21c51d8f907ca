"""``python -m sleuth.cli``: the same as the ``sleuth`` command."""

from sleuth.cli import main

if __name__ == "__main__":
    main()
