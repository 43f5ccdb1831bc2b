"""``python -m crossmetric`` entry point."""

from crossmetric.cli import main

raise SystemExit(main())
