import sys

from sgvla.cli import main

sys.exit(main())
