// Compatibility only. The former BLEMQTT module held both the MQTT client and
// Home Assistant's contract; they are `MQTT` and `AttledHomeAssistant` now.
// This module re-exports both for the files that still `import BLEMQTT`
// (AttledGateway's GatewayLamps.swift and GatewayCommands.swift); delete it
// once none does.
@_exported import MQTT
@_exported import AttledHomeAssistant
