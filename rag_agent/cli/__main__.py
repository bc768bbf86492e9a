"""``python -m rag_agent.cli``: the same program as the ``rag-agent`` script."""

import sys

from rag_agent.cli.app import main

sys.exit(main())
