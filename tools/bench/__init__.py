"""``once bench``: throughput, latency, router CPU and memory through real router processes.

``scenarios`` says what runs, ``procs`` starts and measures the routers, ``pyclients`` and
``cclients`` are the two kinds of load client, ``memory`` is ``once bench memory``,
``compare`` runs another git ref back to back, ``main`` ties them to the command line.
"""
