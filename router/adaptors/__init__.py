"""Adaptors: each translates one protocol's links into the core's ports and calls the
link-lifecycle service (``router/core/lifecycle.py``); ``amqp/`` today, ``mqtt/`` beside it next."""
