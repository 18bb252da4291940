"""`python -m kernel_sandbox [PATH-TO-sandbox]`: the client's demonstration (three requests at
once: an allowed one, one whose refused call is reported, one the server rejects), against the
installed binary unless a path is given."""
import sys

from . import binary
from .client import main

if len(sys.argv) < 2:
    sys.argv.append(binary())
sys.exit(main())
