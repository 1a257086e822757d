"""One module per ``repro`` sub-command; each defines ``register(subparsers)``.

A sub-command's handler is set with ``parser.set_defaults(func=handler)`` and returns
the process exit code. Errors the user can fix raise :class:`repro.errors.ReproError`.
"""
