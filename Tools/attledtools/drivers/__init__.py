"""The processes and worlds of the tests: vworld (the virtual air; its parts in
air/), rcworld (Root Canal), worldproc / attledproc / mqttbroker (a vworld,
attled or mosquitto process driven from Python), bumble_central (the
reference central) and bumble_gatt_central (the judge of a peripheral), both
on bumble_job (the run they share); esphome_client (an aioesphomeapi job) and
bleak_through_proxy (a plain bleak job through bleak-esphome and habluetooth),
the clients of attled proxy."""
