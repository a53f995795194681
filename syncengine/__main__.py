import sys

from syncengine.cli import main

sys.exit(main())
