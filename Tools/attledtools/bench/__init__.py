"""make bench: attled against Bumble (bench), the gateway against a Bumble+paho
reference (gatewaybench, gateway_reference), the gateway's air time (gatewayair),
the Bluetooth proxy against a reference on Bumble (proxybench, proxy_reference);
what the references share (refproc) and the sections' own command line (section)."""
