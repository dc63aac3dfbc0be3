"""`PYTHONPATH=tests python -m support.synth OUT.gpuwhy.db [--hours 24] [--gpus 8] [--rate 10]`."""

import sys

from support.synth import main

sys.exit(main())
