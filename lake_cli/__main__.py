"""``python -m lake_cli``: the ``lake`` command."""

from lake_cli.app import main

raise SystemExit(main())
