"""``python -m tma_study`` = the ``tma-study`` command."""
import sys

from .cli import main

sys.exit(main())
