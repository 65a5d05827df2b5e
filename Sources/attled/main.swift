import AttledCLI
import BLETransport

SystemIO.exit(runCLI(Array(CommandLine.arguments.dropFirst()), environment: processEnvironment()))
