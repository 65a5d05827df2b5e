"""vworld's virtual air, in parts: the link (link.py) and the LE connections it
carries (airlink.py), who hears whom (rooms.py), the controllers on it
(controller.py: the host controllers, with their faults in hostfaults.py, and
the devices'), the transports that serve the host controllers to a host
(hostport.py), and the JSON event lines (events.py)."""
