"""``python -m lake_core.cli``: the ``lake`` command."""

from lake_core.cli.app import main

raise SystemExit(main())
