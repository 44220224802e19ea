"""`python -m graphrag_dag.drivers.cli`, as the `graphrag-dag` script."""

import sys

from graphrag_dag.drivers.cli.entry import main

sys.exit(main())
