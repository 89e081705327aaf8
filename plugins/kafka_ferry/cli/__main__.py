"""``python -m kafka_ferry.cli``: the ``kafka-ferry`` command."""

import sys

from kafka_ferry.cli import main

sys.exit(main())
