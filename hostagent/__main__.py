import sys

from hostagent.agent.cli import main

sys.exit(main())
