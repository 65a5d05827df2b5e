import AttledCLI
#if canImport(Glibc)
import Glibc
#endif

exit(runCLI(Array(CommandLine.arguments.dropFirst()), environment: processEnvironment()))
