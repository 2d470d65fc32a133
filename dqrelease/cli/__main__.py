"""``python -m dqrelease.cli``: the same as the ``dqrelease`` console script."""

from dqrelease.cli import main

if __name__ == "__main__":  # pragma: no cover - `python -m dqrelease.cli`
    main()
