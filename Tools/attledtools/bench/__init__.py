"""make bench: attled against Bumble (bench), the gateway against a Bumble+paho
reference (gatewaybench, gateway_reference), the gateway's air time (gatewayair)."""
