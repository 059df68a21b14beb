"""Programs written against the public client only, shipped with the wheel so that they run
wherever oamd is installed: ``python -m oamd.examples.tavern`` is ``make demo``. Nothing in the
daemon imports them, and the bundled executable leaves them out."""
