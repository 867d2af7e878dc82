import sys

from boo_tui.cli import main

sys.exit(main())
