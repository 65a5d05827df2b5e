"""vworld's virtual air, in parts: the link (link.py), the host controllers
(controller.py) with their faults (hostfaults.py), the transports that serve
them to a host (hostport.py), and the JSON event lines (events.py)."""
