import sys

from accelboard_upload.cli import main

sys.exit(main())
